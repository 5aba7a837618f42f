package signing_test

import (
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/security/signing"
)

const digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func TestSignVerify(t *testing.T) {
	dir := t.TempDir()
	priv, pub := filepath.Join(dir, "topology.key"), filepath.Join(dir, "topology.pub")
	id, err := signing.WriteKeyPair(priv, pub)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(priv); info.Mode().Perm() != 0o600 {
		t.Errorf("private key mode %04o, want 0600", info.Mode().Perm())
	}
	if _, err := signing.WriteKeyPair(priv, pub); err == nil {
		t.Error("WriteKeyPair overwrote an existing key")
	}
	key, err := signing.LoadPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	s := signing.NewSigner(key)
	if s.KeyID() != id || len(id) != 16 {
		t.Fatalf("key id %q, WriteKeyPair said %q", s.KeyID(), id)
	}
	v, err := signing.LoadVerifier([]string{pub})
	if err != nil {
		t.Fatal(err)
	}
	sig := s.Sign(digest)
	if err := v.Verify(digest, id, sig); err != nil {
		t.Fatalf("good signature refused: %v", err)
	}

	other, _ := signing.Generate()
	otherSigner := signing.NewSigner(other)
	forged := append([]byte(nil), sig...)
	forged[0] ^= 1
	// The same key signing the bare digest (no domain) must not verify.
	bare := ed25519.Sign(key, []byte(digest))
	for _, c := range []struct {
		name   string
		digest string
		keyID  string
		sig    []byte
		want   error
	}{
		{"unsigned", digest, "", nil, signing.ErrUnsigned},
		{"unknown key", digest, otherSigner.KeyID(), otherSigner.Sign(digest), signing.ErrUnknownKey},
		{"another key under a trusted id", digest, id, otherSigner.Sign(digest), signing.ErrBadSignature},
		{"flipped bit", digest, id, forged, signing.ErrBadSignature},
		{"another document", strings.Replace(digest, "9", "8", 1), id, sig, signing.ErrBadSignature},
		{"no domain separation", digest, id, bare, signing.ErrBadSignature},
	} {
		if err := v.Verify(c.digest, c.keyID, c.sig); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}

	// Rotation: both keys trusted, both verify.
	both := signing.NewVerifier(s.Public(), otherSigner.Public())
	if err := both.Verify(digest, otherSigner.KeyID(), otherSigner.Sign(digest)); err != nil {
		t.Errorf("second trusted key: %v", err)
	}
	if err := both.Verify(digest, id, sig); err != nil {
		t.Errorf("first trusted key: %v", err)
	}
}

func TestLoadPrivateKeyRefusesReadableFile(t *testing.T) {
	dir := t.TempDir()
	priv := filepath.Join(dir, "k")
	if _, err := signing.WriteKeyPair(priv, filepath.Join(dir, "k.pub")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(priv, 0o640); err != nil {
		t.Fatal(err)
	}
	_, err := signing.LoadPrivateKey(priv)
	if err == nil || !strings.Contains(err.Error(), "mode 0640") {
		t.Fatalf("group-readable key: %v", err)
	}
	// A public key where a private one is expected, and the reverse.
	if _, err := signing.LoadPublicKey(priv); err == nil {
		t.Error("a private key loaded as a public key")
	}
}

func FuzzParsePublicKey(f *testing.F) {
	dir := f.TempDir()
	if _, err := signing.WriteKeyPair(filepath.Join(dir, "k"), filepath.Join(dir, "k.pub")); err != nil {
		f.Fatal(err)
	}
	for _, name := range []string{"k", "k.pub"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if k, err := signing.ParsePublicKey(data, "fuzz"); err == nil && len(k) != ed25519.PublicKeySize {
			t.Fatalf("accepted a %d-byte key", len(k))
		}
		if k, err := signing.ParsePrivateKey(data, "fuzz"); err == nil && len(k) != ed25519.PrivateKeySize {
			t.Fatalf("accepted a %d-byte key", len(k))
		}
	})
}

// TestOpStateDomains: an operator state signature verifies only for its
// own kind, province, key, time and value; never as a topology pointer,
// nor a drain's as a drill's or a balance document's.
func TestOpStateDomains(t *testing.T) {
	key, err := signing.Generate()
	if err != nil {
		t.Fatal(err)
	}
	s := signing.NewSigner(key)
	v := signing.NewVerifier(s.Public())
	at := time.Date(2026, 12, 5, 20, 0, 0, 0, time.UTC)
	o := signing.OpState{Kind: signing.OpDrain, Province: "/anysched/", Key: "drain/server/hefei-1-a", SignedAt: at, Value: []byte(`{"kind":"server","name":"hefei-1-a"}`)}
	sig := s.SignOpState(o)
	if err := v.VerifyOpState(o, s.KeyID(), sig); err != nil {
		t.Fatalf("own signature: %v", err)
	}
	for name, other := range map[string]signing.OpState{
		"as a drill":    {Kind: signing.OpDrill, Province: o.Province, Key: o.Key, SignedAt: at, Value: o.Value},
		"as a balance":  {Kind: signing.OpBalance, Province: o.Province, Key: o.Key, SignedAt: at, Value: o.Value},
		"another key":   {Kind: o.Kind, Province: o.Province, Key: "drain/server/hefei-1-b", SignedAt: at, Value: o.Value},
		"another prov":  {Kind: o.Kind, Province: "/other/", Key: o.Key, SignedAt: at, Value: o.Value},
		"another time":  {Kind: o.Kind, Province: o.Province, Key: o.Key, SignedAt: at.Add(time.Second), Value: o.Value},
		"another value": {Kind: o.Kind, Province: o.Province, Key: o.Key, SignedAt: at, Value: []byte(`{"kind":"server","name":"hefei-1-b"}`)},
	} {
		if err := v.VerifyOpState(other, s.KeyID(), sig); !errors.Is(err, signing.ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", name, err)
		}
	}
	p := signing.Pointer{Province: o.Province, AppliedAt: at}
	if err := v.VerifyPointer(p, s.KeyID(), sig); err == nil {
		t.Error("an operator state signature verifies as a topology pointer")
	}
	if err := v.VerifyOpState(o, "", nil); !errors.Is(err, signing.ErrUnsigned) {
		t.Errorf("unsigned: %v, want ErrUnsigned", err)
	}
}

// The epoch is signed: a pointer's signature does not verify with another
// epoch, and one of epoch 0 is the message signed before epochs existed
// (so that its signature verifies as it always did). Pointers order by
// epoch, then sequence.
func TestPointerEpoch(t *testing.T) {
	key, err := signing.Generate()
	if err != nil {
		t.Fatal(err)
	}
	s := signing.NewSigner(key)
	v := signing.NewVerifier(s.Public())
	at := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	p := signing.Pointer{Province: "/anysched/", Epoch: at.UnixNano(), Seq: 3, AppliedAt: at, Digest: "d", Size: 10, Parts: 1}
	sig := s.SignPointer(p)
	if err := v.VerifyPointer(p, s.KeyID(), sig); err != nil {
		t.Fatalf("own signature: %v", err)
	}
	for name, other := range map[string]signing.Pointer{
		"another epoch": {Province: p.Province, Epoch: p.Epoch + 1, Seq: p.Seq, AppliedAt: at, Digest: p.Digest, Size: p.Size, Parts: p.Parts},
		"no epoch":      {Province: p.Province, Seq: p.Seq, AppliedAt: at, Digest: p.Digest, Size: p.Size, Parts: p.Parts},
	} {
		if err := v.VerifyPointer(other, s.KeyID(), sig); !errors.Is(err, signing.ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", name, err)
		}
	}
	for _, tc := range []struct {
		name string
		a, b signing.Pointer
		want bool
	}{
		{"a lower sequence, same epoch", signing.Pointer{Epoch: 5, Seq: 2}, signing.Pointer{Epoch: 5, Seq: 3}, true},
		{"the same place", signing.Pointer{Epoch: 5, Seq: 3}, signing.Pointer{Epoch: 5, Seq: 3}, false},
		{"a higher sequence of an older epoch", signing.Pointer{Epoch: 4, Seq: 900}, signing.Pointer{Epoch: 5, Seq: 1}, true},
		{"a store before epochs", signing.Pointer{Seq: 900}, signing.Pointer{Epoch: 5, Seq: 1}, true},
		{"a newer epoch from 1", signing.Pointer{Epoch: 6, Seq: 1}, signing.Pointer{Epoch: 5, Seq: 900}, false},
	} {
		if got := tc.a.Before(tc.b); got != tc.want {
			t.Errorf("%s: Before = %v, want %v", tc.name, got, tc.want)
		}
	}
}
