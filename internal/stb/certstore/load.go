package certstore

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
)

// Pair is a certificate file (PEM: the leaf, then its chain) and the file
// of the leaf's private key (PEM, mode 0600 or stricter).
type Pair struct {
	CertFile string
	KeyFile  string
}

// entry is one loaded pair.
type entry struct {
	pair     Pair
	cert     *tls.Certificate
	names    []string // normalised DNS SANs, wildcards included
	notAfter time.Time
}

// label names the certificate in logs and metrics: its first DNS name, else
// its common name.
func (e *entry) label() string {
	if len(e.names) > 0 {
		return e.names[0]
	}
	return e.cert.Leaf.Subject.CommonName
}

// loadPair reads and checks one pair. Anything that would make the
// certificate unusable is an error; what only makes it doubtful (dates,
// no DNS name) is returned as warnings for the caller to log.
func loadPair(p Pair, now time.Time) (*entry, []string, error) {
	keyPEM, err := readFile(p.KeyFile, true)
	if err != nil {
		return nil, nil, err
	}
	certPEM, err := readFile(p.CertFile, false)
	if err != nil {
		return nil, nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, pairError(p, certPEM, keyPEM, err)
	}
	leaf := cert.Leaf
	if leaf == nil { // x509keypairleaf=0
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", p.CertFile, err)
		}
		cert.Leaf = leaf
	}
	e := &entry{pair: p, cert: &cert, notAfter: leaf.NotAfter}
	var warns []string
	for _, n := range leaf.DNSNames {
		n = normalise(n)
		if n == "" || !validPattern(n) {
			warns = append(warns, fmt.Sprintf("%s: DNS name %q ignored: a wildcard must be the whole first label (*.example.net)", p.CertFile, n))
			continue
		}
		e.names = append(e.names, n)
	}
	if len(e.names) == 0 {
		warns = append(warns, fmt.Sprintf("%s: no DNS subject alternative name: only clients without SNI or with an unknown name get it, and only if it is the first (default) certificate", p.CertFile))
	}
	switch {
	case now.After(leaf.NotAfter):
		warns = append(warns, fmt.Sprintf("%s: certificate %q expired on %s; it is served until replaced", p.CertFile, e.label(), leaf.NotAfter.UTC().Format(time.RFC3339)))
	case now.Before(leaf.NotBefore):
		warns = append(warns, fmt.Sprintf("%s: certificate %q is not valid before %s; it is served all the same", p.CertFile, e.label(), leaf.NotBefore.UTC().Format(time.RFC3339)))
	}
	return e, warns, nil
}

// pairError says which file is at fault when tls.X509KeyPair refuses a pair.
func pairError(p Pair, certPEM, keyPEM []byte, err error) error {
	if !hasBlock(certPEM, "CERTIFICATE") {
		return fmt.Errorf("%s holds no PEM certificate", p.CertFile)
	}
	if blk, _ := pem.Decode(keyPEM); blk == nil {
		return fmt.Errorf("%s holds no PEM private key", p.KeyFile)
	}
	return fmt.Errorf("%s is not the key of %s: %v", p.KeyFile, p.CertFile, err)
}

func hasBlock(data []byte, typ string) bool {
	for {
		var blk *pem.Block
		if blk, data = pem.Decode(data); blk == nil {
			return false
		}
		if blk.Type == typ {
			return true
		}
	}
}

// readFile reads a file; a private one must not be open to group or
// others, checked on the descriptor that is read, so that the check and the
// content are of the same file.
func readFile(path string, private bool) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if private {
		if err := checkKeyMode(path, fi); err != nil {
			return nil, err
		}
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	// Bounded: a PEM chain is a few kilobytes; a wrong path (a device, a
	// huge log) must not be read whole.
	const maxPEM = 1 << 20
	b, err := io.ReadAll(io.LimitReader(f, maxPEM+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPEM {
		return nil, fmt.Errorf("%s is larger than %d bytes: not a PEM certificate or key", path, maxPEM)
	}
	return b, nil
}

// checkKeyMode refuses a private key file that group or others may read,
// write or execute: whoever can read it can impersonate the scheduler. fi
// is the file's. It is the rule of the configuration check of every other
// key file (config.privateFile), repeated here because a reload reads files
// that were never validated.
func checkKeyMode(path string, fi fs.FileInfo) error {
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s is readable by group/others (mode %#o): chmod 600", path, uint32(perm))
	}
	return nil
}
