package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"time"

	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// The TLS files are read and parsed at validation, so that --check-config
// refuses what the daemon would fail on at startup (or, worse, on its
// first handshake): a file that is not PEM, a certificate that does not
// parse or has expired, a key that is not the certificate's. A file that
// cannot be read is fileExists's to report.

// certKeyPair checks a certificate and its key (either may be empty).
func certKeyPair(errs *yamlstrict.Errors, path, certFile, keyFile string) {
	certPEM, ok := readable(certFile)
	if !ok {
		return
	}
	if err := checkCertificates(certFile, certPEM, false); err != nil {
		errs.Add(path+".cert_file", "%v", err)
		return
	}
	keyPEM, ok := readable(keyFile)
	if !ok {
		return
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		if blk, _ := pem.Decode(keyPEM); blk == nil {
			errs.Add(path+".key_file", "%s holds no PEM private key", keyFile)
			return
		}
		errs.Add(path+".key_file", "%s is not the key of %s: %v", keyFile, certFile, err)
	}
}

// caFile checks a file of CA certificates.
func caFile(errs *yamlstrict.Errors, path, file string) {
	if data, ok := readable(file); ok {
		if err := checkCertificates(file, data, true); err != nil {
			errs.Add(path, "%v", err)
		}
	}
}

// readable is the file's content; false when there is no file to check.
func readable(file string) ([]byte, bool) {
	if file == "" {
		return nil, false
	}
	b, err := os.ReadFile(file)
	return b, err == nil
}

// checkCertificates parses the PEM certificates of data: the first only
// (a leaf, followed by its chain), or every one (a CA bundle); each must
// be valid now.
func checkCertificates(file string, data []byte, all bool) error {
	n := 0
	for rest := data; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		n++
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return fmt.Errorf("%s: certificate %d does not parse: %v", file, n, err)
		}
		now := time.Now()
		switch {
		case now.After(c.NotAfter):
			return fmt.Errorf("%s: certificate %q expired on %s", file, c.Subject.CommonName, c.NotAfter.UTC().Format(time.RFC3339))
		case now.Before(c.NotBefore):
			return fmt.Errorf("%s: certificate %q is not valid before %s", file, c.Subject.CommonName, c.NotBefore.UTC().Format(time.RFC3339))
		}
		if !all {
			break
		}
	}
	if n == 0 {
		return fmt.Errorf("%s holds no PEM certificate", file)
	}
	return nil
}
