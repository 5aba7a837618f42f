// Package token verifies the viewer tokens the business platform issues at
// login: JWTs (RFC 7519) signed with HMAC-SHA256 under a key id, carrying the
// viewer's id and the profile the QoE allocation needs (desired bitrate,
// interaction frequency, gift spend). Several keys can be live at once so the
// platform can rotate them without a flag day.
//
// The format, for the platform's developers (docs/operations.md has it too):
//
//	header:  {"alg":"HS256","typ":"JWT","kid":"<key id>"}
//	claims:  {"sub":"<viewer id>", "exp":<unix seconds>,
//	          "iat":<optional>, "nbf":<optional>,
//	          "desired_kbps":<optional, > 0>,
//	          "danmaku_per_hour":<optional, >= 0>,
//	          "gift":<optional, >= 0>}
//
// Any JWT library produces it. Only HS256 is accepted (no "none", no
// algorithm chosen by the token), exp is required, and a profile field left
// out takes the scheduler's default.
package token

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// MaxLength is the longest token verified; a longer one is malformed. Real
// tokens are ~250 bytes; the limit bounds the work an attacker can ask for.
const MaxLength = 2048

// MinSecretBytes is the shortest HMAC key accepted (RFC 7518 §3.2: at least
// the hash size).
const MinSecretBytes = 32

// Errors, one per reason a token is refused; Reason gives a metric label.
var (
	ErrMalformed   = errors.New("malformed token")
	ErrUnknownKey  = errors.New("token signed with an unknown key id")
	ErrSignature   = errors.New("token signature does not verify")
	ErrExpired     = errors.New("token expired")
	ErrNotYetValid = errors.New("token not valid yet")
	ErrClaims      = errors.New("token claims out of range")
)

// Reasons lists the metric labels Reason returns.
var Reasons = []string{"malformed", "unknown_key", "bad_signature", "expired", "not_yet_valid", "bad_claims"}

// Reason is the metric label of a Verify error.
func Reason(err error) string {
	switch {
	case errors.Is(err, ErrUnknownKey):
		return "unknown_key"
	case errors.Is(err, ErrSignature):
		return "bad_signature"
	case errors.Is(err, ErrExpired):
		return "expired"
	case errors.Is(err, ErrNotYetValid):
		return "not_yet_valid"
	case errors.Is(err, ErrClaims):
		return "bad_claims"
	default:
		return "malformed"
	}
}

// Key is one signing key.
type Key struct {
	ID     string
	Secret []byte
}

// Claims is what a verified token says about the viewer. A profile field
// the token left out is NaN.
type Claims struct {
	Subject        string
	Expires        time.Time
	DesiredKbps    float64
	DanmakuPerHour float64
	Gift           float64
}

// wire is the JSON claims set.
type wire struct {
	jwt.RegisteredClaims
	DesiredKbps    *float64 `json:"desired_kbps,omitempty"`
	DanmakuPerHour *float64 `json:"danmaku_per_hour,omitempty"`
	Gift           *float64 `json:"gift,omitempty"`
}

// Verifier checks tokens against a fixed key set. It is safe for concurrent use.
type Verifier struct {
	keys   map[string][]byte
	parser *jwt.Parser
	leeway time.Duration
	now    func() time.Time
	cache  *cache // nil: every token is verified in full
}

// Options tune verification.
type Options struct {
	// Leeway absorbs clock skew between the platform and the scheduler on
	// exp, nbf and iat.
	Leeway time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// CacheSize keeps up to this many verified tokens, so an STB that sends
	// the same token with every request pays for one HMAC and JSON decode,
	// not one per request (a hit still checks expiry). 0: no cache.
	CacheSize int
}

// NewVerifier builds a verifier; every key needs a unique non-empty id and
// a secret of at least MinSecretBytes.
func NewVerifier(keys []Key, o Options) (*Verifier, error) {
	if len(keys) == 0 {
		return nil, errors.New("token: no keys")
	}
	v := &Verifier{keys: make(map[string][]byte, len(keys)), leeway: o.Leeway, now: o.Now}
	if v.now == nil {
		v.now = time.Now
	}
	if o.CacheSize > 0 {
		v.cache = newCache(o.CacheSize)
	}
	for i, k := range keys {
		switch {
		case k.ID == "":
			return nil, fmt.Errorf("token: key %d: empty id", i)
		case len(k.Secret) < MinSecretBytes:
			return nil, fmt.Errorf("token: key %q: secret is %d bytes, want at least %d", k.ID, len(k.Secret), MinSecretBytes)
		}
		if _, dup := v.keys[k.ID]; dup {
			return nil, fmt.Errorf("token: key %q: duplicate id", k.ID)
		}
		v.keys[k.ID] = k.Secret
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(o.Leeway),
	}
	if o.Now != nil {
		opts = append(opts, jwt.WithTimeFunc(o.Now))
	}
	v.parser = jwt.NewParser(opts...)
	return v, nil
}

// Verify checks one token and returns its claims; the error wraps one of the
// Err values above.
func (v *Verifier) Verify(tok string) (Claims, error) {
	if tok == "" || len(tok) > MaxLength || strings.Count(tok, ".") != 2 {
		return Claims{}, ErrMalformed
	}
	if v.cache != nil {
		if c, ok := v.cache.get(tok); ok {
			if !v.now().Before(c.Expires.Add(v.leeway)) {
				return Claims{}, ErrExpired
			}
			return c, nil
		}
	}
	c, err := v.verify(tok)
	if err == nil && v.cache != nil {
		v.cache.put(tok, c)
	}
	return c, err
}

func (v *Verifier) verify(tok string) (Claims, error) {
	var w wire
	_, err := v.parser.ParseWithClaims(tok, &w, v.key)
	switch {
	case err == nil:
	case errors.Is(err, ErrUnknownKey):
		return Claims{}, ErrUnknownKey
	case errors.Is(err, jwt.ErrTokenExpired):
		return Claims{}, ErrExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return Claims{}, ErrNotYetValid
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return Claims{}, ErrSignature
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing), errors.Is(err, jwt.ErrTokenInvalidClaims):
		return Claims{}, fmt.Errorf("%w: %v", ErrClaims, err)
	default:
		return Claims{}, ErrMalformed
	}
	return w.claims()
}

// key is the jwt.Keyfunc: the secret named by the header's kid.
func (v *Verifier) key(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	k, ok := v.keys[kid]
	if !ok {
		return nil, ErrUnknownKey
	}
	return k, nil
}

// Profile limits: beyond them a value is a platform bug, not a viewer.
const (
	maxSubject = 256
	maxKbps    = 1e6
	maxDanmaku = 1e5
	maxGift    = 1e9
)

func (w *wire) claims() (Claims, error) {
	c := Claims{Subject: w.Subject, DesiredKbps: math.NaN(), DanmakuPerHour: math.NaN(), Gift: math.NaN()}
	if w.ExpiresAt != nil {
		c.Expires = w.ExpiresAt.Time
	}
	if c.Subject == "" || len(c.Subject) > maxSubject {
		return Claims{}, fmt.Errorf("%w: sub must be 1-%d bytes", ErrClaims, maxSubject)
	}
	for _, f := range []struct {
		name     string
		p        *float64
		dst      *float64
		min, max float64
		open     bool // min excluded
	}{
		{"desired_kbps", w.DesiredKbps, &c.DesiredKbps, 0, maxKbps, true},
		{"danmaku_per_hour", w.DanmakuPerHour, &c.DanmakuPerHour, 0, maxDanmaku, false},
		{"gift", w.Gift, &c.Gift, 0, maxGift, false},
	} {
		if f.p == nil {
			continue
		}
		x := *f.p
		if math.IsNaN(x) || x < f.min || (f.open && x == f.min) || x > f.max {
			return Claims{}, fmt.Errorf("%w: %s %v is out of range", ErrClaims, f.name, x)
		}
		*f.dst = x
	}
	return c, nil
}

// Sign issues a token, as the business platform does; used by tests, the
// lab's STBs and `schedctl token`.
func Sign(k Key, c Claims) (string, error) {
	w := wire{RegisteredClaims: jwt.RegisteredClaims{Subject: c.Subject, ExpiresAt: jwt.NewNumericDate(c.Expires)}}
	for _, f := range []struct {
		v   float64
		dst **float64
	}{{c.DesiredKbps, &w.DesiredKbps}, {c.DanmakuPerHour, &w.DanmakuPerHour}, {c.Gift, &w.Gift}} {
		if !math.IsNaN(f.v) {
			x := f.v
			*f.dst = &x
		}
	}
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, w)
	t.Header["kid"] = k.ID
	return t.SignedString(k.Secret)
}

// ReadSecret reads a key file: the secret is the file's bytes without
// surrounding whitespace.
func ReadSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := []byte(strings.TrimSpace(string(b)))
	if len(s) < MinSecretBytes {
		return nil, fmt.Errorf("%s: secret is %d bytes, want at least %d", path, len(s), MinSecretBytes)
	}
	return s, nil
}
