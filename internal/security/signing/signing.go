// Package signing signs and verifies topology documents with Ed25519, so
// that write access to etcd alone cannot redirect the province: the center
// signs each apply's pointer (province, sequence, time, the document's
// digest, size and parts), every daemon that reads the topology verifies it
// against the public keys it trusts before reading anything else.
//
// The signed messages are domain-separated ("anysched-topology-v2\n" and
// the pointer's fields; "anysched-topology-v1\n" and the hex SHA-256 digest
// alone in disk caches written before), so a signature made for anything
// else never verifies as a topology's. A key is named by its id: the
// first 8 bytes of SHA-256 of the raw public key, in hex.
package signing

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Domain prefixes every signed message of the first format: a document's
// digest alone (disk caches written before the pointer was signed).
const Domain = "anysched-topology-v1\n"

// PointerDomain prefixes a signed topology pointer.
const PointerDomain = "anysched-topology-v2\n"

// Pointer is what the signature of a topology pointer covers: which
// province, which apply (its sequence, never reused: a reader refuses one
// at or below the last it verified), when, and the document (its digest,
// its size once decompressed and the number of its parts), so that a
// reader verifies all it will rely on before it reads a part. Epoch names
// the store the apply was made in (the unix nanoseconds of its founding:
// the first apply into an empty store, or a restore); 0 is a store founded
// before epochs, and its message is the one signed before they were.
type Pointer struct {
	Province  string // the store's key prefix
	Epoch     int64
	Seq       int64
	AppliedAt time.Time
	Digest    string
	Size      int64
	Parts     int
}

func (p Pointer) message() []byte {
	m := fmt.Appendf([]byte(PointerDomain), "province %q\nseq %d\napplied %d\ndigest %s\nsize %d\nparts %d\n",
		p.Province, p.Seq, p.AppliedAt.UnixNano(), p.Digest, p.Size, p.Parts)
	if p.Epoch != 0 {
		m = fmt.Appendf(m, "epoch %d\n", p.Epoch)
	}
	return m
}

// Before reports whether p was made before q: in an earlier store (a lower
// epoch), or in the same store with a lower sequence. A reader refuses a
// pointer made before the last it verified, and one at the same place with
// another document.
func (p Pointer) Before(q Pointer) bool {
	if p.Epoch != q.Epoch {
		return p.Epoch < q.Epoch
	}
	return p.Seq < q.Seq
}

// KeyID names a public key: hex of the first 8 bytes of its SHA-256.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

func message(digest string) []byte { return []byte(Domain + digest) }

// Signer signs documents with one private key.
type Signer struct {
	key ed25519.PrivateKey
	id  string
}

// NewSigner wraps a private key.
func NewSigner(key ed25519.PrivateKey) *Signer {
	return &Signer{key: key, id: KeyID(key.Public().(ed25519.PublicKey))}
}

// KeyID is the id of the signer's public key.
func (s *Signer) KeyID() string { return s.id }

// Public is the signer's public key.
func (s *Signer) Public() ed25519.PublicKey { return s.key.Public().(ed25519.PublicKey) }

// Sign signs a document digest (hex SHA-256 of the stored form): the
// first format, kept for reading old disk caches; stores sign pointers.
func (s *Signer) Sign(digest string) []byte { return ed25519.Sign(s.key, message(digest)) }

// SignPointer signs a topology pointer.
func (s *Signer) SignPointer(p Pointer) []byte { return ed25519.Sign(s.key, p.message()) }

// Why a document is refused; errors.Is works on Verify's errors.
var (
	ErrUnsigned     = errors.New("signing: the document is not signed")
	ErrUnknownKey   = errors.New("signing: the document is signed by a key that is not trusted")
	ErrBadSignature = errors.New("signing: the signature does not verify")
)

// Verifier checks signatures against a set of trusted public keys; several
// keys allow a rotation without downtime.
type Verifier struct {
	keys map[string]ed25519.PublicKey
}

// NewVerifier trusts the given keys.
func NewVerifier(keys ...ed25519.PublicKey) *Verifier {
	v := &Verifier{keys: make(map[string]ed25519.PublicKey, len(keys))}
	for _, k := range keys {
		v.keys[KeyID(k)] = k
	}
	return v
}

// KeyIDs lists the trusted keys' ids, sorted.
func (v *Verifier) KeyIDs() []string {
	ids := make([]string, 0, len(v.keys))
	for id := range v.keys {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Verify checks that sig is a trusted key's signature of digest (the
// first format).
func (v *Verifier) Verify(digest, keyID string, sig []byte) error {
	return v.verify(message(digest), keyID, sig)
}

// VerifyPointer checks that sig is a trusted key's signature of p.
func (v *Verifier) VerifyPointer(p Pointer, keyID string, sig []byte) error {
	return v.verify(p.message(), keyID, sig)
}

func (v *Verifier) verify(msg []byte, keyID string, sig []byte) error {
	if len(sig) == 0 && keyID == "" {
		return ErrUnsigned
	}
	k, ok := v.keys[keyID]
	if !ok {
		return fmt.Errorf("%w (key id %q; trusted: %s)", ErrUnknownKey, keyID, strings.Join(v.KeyIDs(), ", "))
	}
	if !ed25519.Verify(k, msg, sig) {
		return fmt.Errorf("%w (key id %s)", ErrBadSignature, keyID)
	}
	return nil
}

// Generate creates a key pair.
func Generate() (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("signing: generate key: %w", err)
	}
	return priv, nil
}

// WriteKeyPair writes a new key pair: the private key (PKCS#8 PEM, mode
// 0600) at privPath and the public key (PKIX PEM, 0644) at pubPath. It
// refuses to overwrite either file: replacing a signing key is a rotation,
// done on purpose.
func WriteKeyPair(privPath, pubPath string) (keyID string, err error) {
	priv, err := Generate()
	if err != nil {
		return "", err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", fmt.Errorf("signing: encode private key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		return "", fmt.Errorf("signing: encode public key: %w", err)
	}
	if err := writeNew(privPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return "", err
	}
	if err := writeNew(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		os.Remove(privPath) // half a pair is of no use
		return "", err
	}
	return KeyID(priv.Public().(ed25519.PublicKey)), nil
}

func writeNew(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("signing: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("signing: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("signing: write %s: %w", path, err)
	}
	return nil
}

// LoadPrivateKey reads a PKCS#8 PEM Ed25519 private key. A key file that
// group or others may read is refused: whoever reads it can sign a
// province.
func LoadPrivateKey(path string) (ed25519.PrivateKey, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("signing: %s: mode %04o lets group or others read the key; chmod 600 it", path, perm)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	return ParsePrivateKey(data, path)
}

// ParsePrivateKey reads a PKCS#8 PEM Ed25519 private key; name says where
// it came from in errors.
func ParsePrivateKey(data []byte, name string) (ed25519.PrivateKey, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("signing: %s: not a PEM \"PRIVATE KEY\" (PKCS#8)", name)
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("signing: %s: %w", name, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("signing: %s: a %T, not an Ed25519 key", name, k)
	}
	return priv, nil
}

// LoadPublicKey reads a PKIX PEM Ed25519 public key.
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	return ParsePublicKey(data, path)
}

// ParsePublicKey reads a PKIX PEM Ed25519 public key; name says where it
// came from in errors.
func ParsePublicKey(data []byte, name string) (ed25519.PublicKey, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("signing: %s: not a PEM \"PUBLIC KEY\"", name)
	}
	k, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("signing: %s: %w", name, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("signing: %s: a %T, not an Ed25519 key", name, k)
	}
	return pub, nil
}

// LoadVerifier trusts the public keys in the given files; nil for none.
func LoadVerifier(paths []string) (*Verifier, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	keys := make([]ed25519.PublicKey, 0, len(paths))
	for _, p := range paths {
		k, err := LoadPublicKey(p)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return NewVerifier(keys...), nil
}

// OpKind is a kind of operator state the center signs; each has a domain of
// its own, so that a signature on one kind never verifies as another, nor
// as a topology.
type OpKind string

// Operator state kinds.
const (
	OpDrain   OpKind = "drain"
	OpDrill   OpKind = "drill"
	OpBalance OpKind = "balance"
)

// opDomain prefixes a signed operator state value of kind k.
func opDomain(k OpKind) string { return "anysched-opstate-" + string(k) + "-v1\n" }

// OpState is what the signature of an operator state value covers: its
// kind, the province (the store's key prefix), the etcd key it is stored
// at (within the province), so that a signed value moved to another key
// does not verify, when the center signed it, and the value itself (its
// SHA-256, of the exact bytes stored apart from the signature).
type OpState struct {
	Kind     OpKind
	Province string
	Key      string
	SignedAt time.Time
	Value    []byte
}

func (o OpState) message() []byte {
	sum := sha256.Sum256(o.Value)
	return fmt.Appendf([]byte(opDomain(o.Kind)), "province %q\nkey %q\nsigned %d\nsha256 %x\n",
		o.Province, o.Key, o.SignedAt.UnixNano(), sum)
}

// SignOpState signs an operator state value.
func (s *Signer) SignOpState(o OpState) []byte { return ed25519.Sign(s.key, o.message()) }

// VerifyOpState checks that sig is a trusted key's signature of o.
func (v *Verifier) VerifyOpState(o OpState, keyID string, sig []byte) error {
	return v.verify(o.message(), keyID, sig)
}
