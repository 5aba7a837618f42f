package token

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var (
	now  = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	k1   = Key{ID: "2026-11", Secret: []byte("0123456789abcdef0123456789abcdef")}
	k2   = Key{ID: "2026-12", Secret: []byte("fedcba9876543210fedcba9876543210")}
	nan  = math.NaN()
	full = Claims{Subject: "stb-42", Expires: now.Add(time.Hour), DesiredKbps: 2500, DanmakuPerHour: 3, Gift: 90}
)

func verifier(t testing.TB) *Verifier {
	t.Helper()
	v, err := NewVerifier([]Key{k1, k2}, Options{Leeway: 30 * time.Second, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func sign(t testing.TB, k Key, c Claims) string {
	t.Helper()
	s, err := Sign(k, c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// raw builds a token from a header and claims JSON, signed with secret.
func raw(t testing.TB, header, claims string, secret []byte) string {
	t.Helper()
	enc := base64.RawURLEncoding
	si := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(claims))
	sig, err := jwt.SigningMethodHS256.Sign(si, secret)
	if err != nil {
		t.Fatal(err)
	}
	return si + "." + enc.EncodeToString(sig)
}

func TestVerify(t *testing.T) {
	v := verifier(t)
	good := sign(t, k1, full)
	parts := strings.Split(good, ".")
	tamperedClaims := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"stb-42","exp":1900000000,"desired_kbps":99999}`))
	hdr := `{"alg":"HS256","typ":"JWT","kid":"2026-11"}`
	exp := now.Add(time.Hour).Unix()
	tests := []struct {
		name string
		tok  string
		want error
	}{
		{"valid, first key", good, nil},
		{"valid, second key (rotation)", sign(t, k2, full), nil},
		{"valid, profile left out", sign(t, k1, Claims{Subject: "a", Expires: now.Add(time.Minute), DesiredKbps: nan, DanmakuPerHour: nan, Gift: nan}), nil},
		{"expired", sign(t, k1, Claims{Subject: "a", Expires: now.Add(-time.Minute), DesiredKbps: nan, DanmakuPerHour: nan, Gift: nan}), ErrExpired},
		{"expired within leeway", sign(t, k1, Claims{Subject: "a", Expires: now.Add(-10 * time.Second), DesiredKbps: nan, DanmakuPerHour: nan, Gift: nan}), nil},
		{"unknown key id", sign(t, Key{ID: "2025-01", Secret: k1.Secret}, full), ErrUnknownKey},
		{"known id, wrong secret", sign(t, Key{ID: k1.ID, Secret: k2.Secret}, full), ErrSignature},
		{"tampered claims", parts[0] + "." + tamperedClaims + "." + parts[2], ErrSignature},
		{"signature cut", parts[0] + "." + parts[1] + ".", ErrSignature},
		{"alg none", base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"2026-11"}`)) + "." + parts[1] + ".", ErrSignature},
		{"alg HS512", func() string {
			tk := jwt.NewWithClaims(jwt.SigningMethodHS512, jwt.MapClaims{"sub": "a", "exp": exp})
			tk.Header["kid"] = k1.ID
			s, _ := tk.SignedString(k1.Secret)
			return s
		}(), ErrSignature},
		{"no kid", raw(t, `{"alg":"HS256","typ":"JWT"}`, `{"sub":"a","exp":1900000000}`, k1.Secret), ErrUnknownKey},
		{"no exp", raw(t, hdr, `{"sub":"a"}`, k1.Secret), ErrClaims},
		{"no sub", raw(t, hdr, `{"exp":1900000000}`, k1.Secret), ErrClaims},
		{"not before in the future", raw(t, hdr, `{"sub":"a","exp":1900000000,"nbf":1900000000}`, k1.Secret), ErrNotYetValid},
		{"issued in the future", raw(t, hdr, `{"sub":"a","exp":1900000000,"iat":1900000000}`, k1.Secret), ErrNotYetValid},
		{"desired_kbps zero", raw(t, hdr, `{"sub":"a","exp":1900000000,"desired_kbps":0}`, k1.Secret), ErrClaims},
		{"desired_kbps huge", raw(t, hdr, `{"sub":"a","exp":1900000000,"desired_kbps":1e12}`, k1.Secret), ErrClaims},
		{"gift negative", raw(t, hdr, `{"sub":"a","exp":1900000000,"gift":-1}`, k1.Secret), ErrClaims},
		{"danmaku a string", raw(t, hdr, `{"sub":"a","exp":1900000000,"danmaku_per_hour":"3"}`, k1.Secret), ErrMalformed},
		{"claims not JSON", raw(t, hdr, `sub=a`, k1.Secret), ErrMalformed},
		{"empty", "", ErrMalformed},
		{"two parts", parts[0] + "." + parts[1], ErrMalformed},
		{"four parts", good + ".x", ErrMalformed},
		{"not base64", "!!!." + parts[1] + "." + parts[2], ErrMalformed},
		{"too long", good + strings.Repeat("A", MaxLength), ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := v.Verify(tt.tok)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if c.Subject == "" || c.Expires.IsZero() {
					t.Fatalf("claims not filled: %+v", c)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
			if c != (Claims{}) {
				t.Fatalf("a refused token returned claims %+v", c)
			}
		})
	}
}

func TestClaimsRoundTrip(t *testing.T) {
	v := verifier(t)
	c, err := v.Verify(sign(t, k1, full))
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != "stb-42" || c.DesiredKbps != 2500 || c.DanmakuPerHour != 3 || c.Gift != 90 || !c.Expires.Equal(full.Expires) {
		t.Fatalf("claims %+v, want %+v", c, full)
	}
	c, err = v.Verify(sign(t, k1, Claims{Subject: "b", Expires: now.Add(time.Hour), DesiredKbps: nan, DanmakuPerHour: 0, Gift: nan}))
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(c.DesiredKbps) || !math.IsNaN(c.Gift) || c.DanmakuPerHour != 0 {
		t.Fatalf("left-out fields must be NaN and a zero kept: %+v", c)
	}
}

func TestNewVerifierRejectsBadKeys(t *testing.T) {
	for name, keys := range map[string][]Key{
		"none":      nil,
		"empty id":  {{ID: "", Secret: k1.Secret}},
		"short":     {{ID: "a", Secret: []byte("short")}},
		"duplicate": {k1, {ID: k1.ID, Secret: k2.Secret}},
	} {
		if _, err := NewVerifier(keys, Options{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestReason(t *testing.T) {
	for _, err := range []error{ErrMalformed, ErrUnknownKey, ErrSignature, ErrExpired, ErrNotYetValid, ErrClaims} {
		r := Reason(err)
		found := false
		for _, x := range Reasons {
			found = found || x == r
		}
		if !found {
			t.Errorf("Reason(%v) = %q, not in Reasons", err, r)
		}
	}
	if Reason(ErrExpired) == Reason(ErrSignature) {
		t.Fatal("distinct errors share a reason")
	}
}

func FuzzVerify(f *testing.F) {
	v := verifier(f)
	good := sign(f, k1, full)
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add("a.b.c")
	f.Add("..")
	f.Add(raw(f, `{"alg":"HS256","kid":"2026-11"}`, `{"sub":"a","exp":1e300}`, k1.Secret))
	f.Add(raw(f, `{"alg":"HS256","kid":["x"]}`, `{"sub":"a","exp":1900000000}`, k1.Secret))
	f.Add(raw(f, `{"alg":"HS256","kid":"2026-11","crit":["b64"]}`, `{"sub":"a","exp":1900000000}`, k1.Secret))
	f.Add(raw(f, `{"alg":"HS256","kid":"2026-11"}`, `{"sub":"a","exp":"1900000000"}`, k1.Secret))
	f.Add(raw(f, `{"alg":"HS256","kid":"2026-11"}`, `{"sub":"a","exp":1900000000,"aud":["x","y"],"iss":"p","cnet":"100.64.0.0/10"}`, k1.Secret))
	f.Add(good + "=")
	strict := base64.RawURLEncoding.Strict()
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := v.Verify(tok)
		if err == nil {
			// One spelling per token: every segment is canonical base64url.
			for _, seg := range strings.Split(tok, ".") {
				b, derr := strict.DecodeString(seg)
				if derr != nil || base64.RawURLEncoding.EncodeToString(b) != seg {
					t.Fatalf("accepted non-canonical segment %q", seg)
				}
			}
		}
		if err != nil {
			if c != (Claims{}) {
				t.Fatalf("refused token returned claims %+v", c)
			}
			if Reason(err) == "" {
				t.Fatal("no reason")
			}
			return
		}
		// Anything accepted must carry a subject and a valid profile.
		if c.Subject == "" || c.DesiredKbps <= 0 && !math.IsNaN(c.DesiredKbps) || c.Gift < 0 || c.DanmakuPerHour < 0 {
			t.Fatalf("accepted bad claims %+v", c)
		}
	})
}

func BenchmarkVerify(b *testing.B) {
	v := verifier(b)
	tok := sign(b, k1, full)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(tok); err != nil {
			b.Fatal(err)
		}
	}
}

// The cache must answer exactly as a full verification does: the same
// claims, and expiry still enforced on a hit.
func TestCache(t *testing.T) {
	clock := now
	v, err := NewVerifier([]Key{k1}, Options{Leeway: 30 * time.Second, Now: func() time.Time { return clock }, CacheSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	tok := sign(t, k1, full)
	for range 3 {
		c, err := v.Verify(tok)
		if err != nil || c.Subject != full.Subject || !c.Expires.Equal(full.Expires) || c.DesiredKbps != full.DesiredKbps || c.Gift != full.Gift {
			t.Fatalf("Verify = %+v, %v; want %+v", c, err, full)
		}
	}
	if _, err := v.Verify(tok[:len(tok)-1] + "A"); !errors.Is(err, ErrSignature) {
		t.Fatalf("tampered token after a cached one: %v", err)
	}
	clock = full.Expires.Add(31 * time.Second)
	if _, err := v.Verify(tok); !errors.Is(err, ErrExpired) {
		t.Fatalf("cached token past its expiry: %v", err)
	}
	// More tokens than the cache holds: all still verify.
	clock = now
	for i := range 40 {
		c := full
		c.Subject = fmt.Sprintf("stb-%d", i)
		if got, err := v.Verify(sign(t, k1, c)); err != nil || got.Subject != c.Subject {
			t.Fatalf("token %d: %+v %v", i, got, err)
		}
	}
}

func BenchmarkVerifyCached(b *testing.B) {
	v, err := NewVerifier([]Key{k1}, Options{Now: func() time.Time { return now }, CacheSize: 1 << 16})
	if err != nil {
		b.Fatal(err)
	}
	tok := sign(b, k1, full)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(tok); err != nil {
			b.Fatal(err)
		}
	}
}
