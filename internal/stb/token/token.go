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
//	          "iss":<required when the scheduler sets an issuer>,
//	          "aud":<string or array; required when it sets an audience>,
//	          "cnet":<optional CIDR the client must be in, e.g. "100.64.1.0/24">,
//	          "desired_kbps":<optional, > 0>,
//	          "danmaku_per_hour":<optional, >= 0>,
//	          "gift":<optional, >= 0>}
//
// Any JWT library produces it. The parser is this package's own, so that
// every rule is explicit: only HS256 (no "none", no algorithm chosen by the
// token), no "crit" header (RFC 7515 §4.1.11: no extension is understood),
// unpadded canonical base64url only, dates as JSON numbers only, exp
// required and no further from iat (or from now) than the maximum lifetime.
// The signature is checked before the claims are decoded. A profile field
// left out takes the scheduler's default.
package token

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// MaxLength is the longest token verified; a longer one is malformed. Real
// tokens are ~250 bytes; the limit bounds the work an attacker can ask for.
const MaxLength = 2048

// MinSecretBytes is the shortest HMAC key accepted (RFC 7518 §3.2: at least
// the hash size).
const MinSecretBytes = 32

// Alg is the only signature algorithm accepted.
const Alg = "HS256"

// Errors, one per reason a token is refused; Reason gives a metric label.
var (
	ErrMalformed   = errors.New("malformed token")
	ErrUnknownKey  = errors.New("token signed with an unknown key id")
	ErrSignature   = errors.New("token signature does not verify")
	ErrExpired     = errors.New("token expired")
	ErrNotYetValid = errors.New("token not valid yet")
	ErrClaims      = errors.New("token claims out of range")
	ErrIssuer      = errors.New("token issuer not accepted")
	ErrAudience    = errors.New("token audience not accepted")
	ErrLifetime    = errors.New("token lifetime exceeds the maximum")
	ErrNetwork     = errors.New("token not valid from this client's network")
)

// Reasons lists the metric labels Reason returns.
var Reasons = []string{
	"malformed", "unknown_key", "bad_signature", "expired", "not_yet_valid", "bad_claims",
	"bad_issuer", "bad_audience", "too_long_lived", "bad_network",
}

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
	case errors.Is(err, ErrIssuer):
		return "bad_issuer"
	case errors.Is(err, ErrAudience):
		return "bad_audience"
	case errors.Is(err, ErrLifetime):
		return "too_long_lived"
	case errors.Is(err, ErrNetwork):
		return "bad_network"
	default:
		return "malformed"
	}
}

// Key is one signing key.
type Key struct {
	ID     string
	Secret []byte
}

// Claims is what a verified token says about the viewer (and, for Sign,
// what a token is to say). A profile field the token left out is NaN.
type Claims struct {
	Subject string
	Expires time.Time
	// IssuedAt is iat; zero when absent.
	IssuedAt time.Time
	// Issuer and Audience are iss and aud (Sign writes one audience; a
	// verified token's are checked, not returned).
	Issuer, Audience string
	// Network is cnet: the client must be in it; invalid when absent.
	Network        netip.Prefix
	DesiredKbps    float64
	DanmakuPerHour float64
	Gift           float64
}

// Verifier checks tokens against a fixed key set. It is safe for concurrent use.
type Verifier struct {
	keys           map[string][]byte
	leeway         time.Duration
	now            func() time.Time
	issuer         string
	audience       string
	maxLifetime    time.Duration
	requireNetwork bool
	cache          *cache // nil: every token is verified in full
}

// Options tune verification. The yaml tags are the configuration file's
// keys (Config); the runtime hooks are the program's (yaml:"-").
type Options struct {
	// Leeway absorbs clock skew between the platform and the scheduler on
	// exp, nbf and iat.
	Leeway time.Duration `yaml:"leeway"`
	// Now is the clock; nil: time.Now.
	Now func() time.Time `yaml:"-"`
	// CacheSize keeps up to this many verified tokens, so an STB that sends
	// the same token with every request pays for one HMAC and JSON decode,
	// not one per request (a hit still checks expiry and the client's
	// network). 0: no cache. A full shard is emptied, so size it for the
	// city's viewers with tokens: smaller, most requests miss (an HMAC, a
	// JSON decode and about 50 allocations each) as the shards fill and
	// empty again.
	CacheSize int `yaml:"token_cache"`
	// Issuer, when set, must equal the token's iss.
	Issuer string `yaml:"token_issuer"`
	// Audience, when set, must be (one of) the token's aud. When it is not
	// set a token carrying aud is refused (RFC 7519 §4.1.3: the recipient
	// must identify itself with the audience).
	Audience string `yaml:"token_audience"`
	// MaxLifetime bounds exp - iat (exp - now when iat is absent, plus
	// Leeway), so a leaked token cannot be good for years. 0: no bound.
	MaxLifetime time.Duration `yaml:"max_token_lifetime"`
	// RequireNetwork refuses tokens without a cnet claim (the client
	// network the platform saw at login).
	RequireNetwork bool `yaml:"require_network_binding"`
}

// NewVerifier builds a verifier; every key needs a unique non-empty id and
// a secret of at least MinSecretBytes.
func NewVerifier(keys []Key, o Options) (*Verifier, error) {
	if len(keys) == 0 {
		return nil, errors.New("token: no keys")
	}
	if o.Leeway < 0 || o.MaxLifetime < 0 {
		return nil, errors.New("token: negative leeway or maximum lifetime")
	}
	v := &Verifier{
		keys: make(map[string][]byte, len(keys)), leeway: o.Leeway, now: o.Now,
		issuer: o.Issuer, audience: o.Audience, maxLifetime: o.MaxLifetime, requireNetwork: o.RequireNetwork,
	}
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
	return v, nil
}

// Verify checks one token and returns its claims; the error wraps one of the
// Err values above. It checks everything but the client's network: callers
// answering a client use VerifyFrom.
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
	if err != nil {
		return Claims{}, err
	}
	if v.cache != nil {
		v.cache.put(tok, c)
	}
	return c, nil
}

// VerifyFrom is Verify for a request from client: a token bound to a
// network (cnet) is refused from outside it.
func (v *Verifier) VerifyFrom(tok string, client netip.Addr) (Claims, error) {
	c, err := v.Verify(tok)
	if err != nil {
		return Claims{}, err
	}
	if c.Network.IsValid() && !c.Network.Contains(client.Unmap()) {
		return Claims{}, fmt.Errorf("%w: client %s is outside %s", ErrNetwork, client, c.Network)
	}
	return c, nil
}

// b64 is the only encoding accepted: base64url without padding, with the
// unused bits of the last character zero (RFC 7515 §2, §C).
var b64 = base64.RawURLEncoding.Strict()

// isB64URL reports whether s holds base64url alphabet bytes only. The
// decoder alone would skip CR and LF, so the same token would have several
// spellings.
func isB64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// header is the JOSE header. Unknown members are ignored (RFC 7515 §4),
// except that crit, which says they must not be, is refused.
type header struct {
	Alg  string          `json:"alg"`
	Kid  string          `json:"kid"`
	Crit json.RawMessage `json:"crit"`
}

// wire is the JSON claims set.
type wire struct {
	Sub            string      `json:"sub"`
	Iss            *string     `json:"iss"`
	Aud            audience    `json:"aud"`
	Exp            numericDate `json:"exp"`
	Nbf            numericDate `json:"nbf"`
	Iat            numericDate `json:"iat"`
	Cnet           *string     `json:"cnet"`
	DesiredKbps    *float64    `json:"desired_kbps"`
	DanmakuPerHour *float64    `json:"danmaku_per_hour"`
	Gift           *float64    `json:"gift"`
	_              struct{}    // keep keyed literals
}

// errDate marks a date that is not a JSON number in range.
var errDate = errors.New("dates must be JSON numbers of seconds since 1970 up to year 9999")

// maxDate is 9999-12-31T23:59:59Z: beyond it time arithmetic overflows
// nothing, but no real token goes there.
const maxDate = 253402300799

// numericDate is an RFC 7519 NumericDate: a JSON number only (a string is
// refused, whatever it holds).
type numericDate struct {
	t   time.Time
	set bool
}

func (d *numericDate) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || !(b[0] == '-' || '0' <= b[0] && b[0] <= '9') {
		return errDate
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > maxDate {
		return errDate
	}
	sec, frac := math.Modf(f)
	d.t, d.set = time.Unix(int64(sec), int64(frac*1e9)).UTC(), true
	return nil
}

// audience is aud: one string or an array of strings (RFC 7519 §4.1.3).
type audience struct {
	list []string
	set  bool
}

func (a *audience) UnmarshalJSON(b []byte) error {
	a.set = true
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		a.list = []string{s}
		return nil
	}
	if len(b) == 0 || b[0] != '[' {
		return errors.New("aud must be a string or an array of strings")
	}
	return json.Unmarshal(b, &a.list)
}

func (v *Verifier) verify(tok string) (Claims, error) {
	i := strings.IndexByte(tok, '.')
	j := i + 1 + strings.IndexByte(tok[i+1:], '.')
	h64, c64, s64 := tok[:i], tok[i+1:j], tok[j+1:]
	if !isB64URL(h64) || !isB64URL(c64) || !isB64URL(s64) {
		return Claims{}, fmt.Errorf("%w: not unpadded base64url", ErrMalformed)
	}
	hb, err := b64.DecodeString(h64)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: header: not canonical base64url", ErrMalformed)
	}
	var h header
	if err := json.Unmarshal(hb, &h); err != nil {
		return Claims{}, fmt.Errorf("%w: header is not a JSON object of the expected members", ErrMalformed)
	}
	if h.Crit != nil {
		return Claims{}, fmt.Errorf("%w: crit header: no extension is understood", ErrMalformed)
	}
	if h.Alg != Alg {
		return Claims{}, fmt.Errorf("%w: alg %.20q is not %s", ErrSignature, h.Alg, Alg)
	}
	secret, ok := v.keys[h.Kid]
	if !ok {
		return Claims{}, ErrUnknownKey
	}
	sig, err := b64.DecodeString(s64)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: signature: not canonical base64url", ErrMalformed)
	}
	mac := hmac.New(sha256.New, secret)
	_, _ = io.WriteString(mac, tok[:j])
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return Claims{}, ErrSignature
	}
	cb, err := b64.DecodeString(c64)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: claims: not canonical base64url", ErrMalformed)
	}
	var w wire
	if err := json.Unmarshal(cb, &w); err != nil {
		if errors.Is(err, errDate) {
			return Claims{}, fmt.Errorf("%w: %v", ErrClaims, errDate)
		}
		return Claims{}, fmt.Errorf("%w: claims are not a JSON object of the expected types", ErrMalformed)
	}
	return v.check(&w)
}

// Profile limits: beyond them a value is a platform bug, not a viewer.
const (
	maxSubject = 256
	maxKbps    = 1e6
	maxDanmaku = 1e5
	maxGift    = 1e9
)

// check applies the rules on the claims of a token whose signature holds.
func (v *Verifier) check(w *wire) (Claims, error) {
	now := v.now()
	switch {
	case !w.Exp.set:
		return Claims{}, fmt.Errorf("%w: exp is required", ErrClaims)
	case w.Sub == "" || len(w.Sub) > maxSubject:
		return Claims{}, fmt.Errorf("%w: sub must be 1-%d bytes", ErrClaims, maxSubject)
	case !now.Before(w.Exp.t.Add(v.leeway)):
		return Claims{}, ErrExpired
	case w.Nbf.set && now.Add(v.leeway).Before(w.Nbf.t):
		return Claims{}, fmt.Errorf("%w: nbf is in the future", ErrNotYetValid)
	case w.Iat.set && now.Add(v.leeway).Before(w.Iat.t):
		return Claims{}, fmt.Errorf("%w: iat is in the future", ErrNotYetValid)
	case w.Iat.set && w.Exp.t.Before(w.Iat.t):
		return Claims{}, fmt.Errorf("%w: exp is before iat", ErrClaims)
	}
	if v.maxLifetime > 0 {
		// Issued at iat, the platform's clock says how long it lives; without
		// it, from now, with the skew allowance.
		life, limit := w.Exp.t.Sub(now), v.maxLifetime+v.leeway
		if w.Iat.set {
			life, limit = w.Exp.t.Sub(w.Iat.t), v.maxLifetime
		}
		if life > limit {
			return Claims{}, fmt.Errorf("%w: lives %s, at most %s", ErrLifetime, life.Round(time.Second), v.maxLifetime)
		}
	}
	if v.issuer != "" && (w.Iss == nil || *w.Iss != v.issuer) {
		return Claims{}, fmt.Errorf("%w: iss must be %q", ErrIssuer, v.issuer)
	}
	switch {
	case w.Aud.set && v.audience == "":
		return Claims{}, fmt.Errorf("%w: the token names an audience and this scheduler has none configured", ErrAudience)
	case v.audience != "" && !contains(w.Aud.list, v.audience):
		return Claims{}, fmt.Errorf("%w: aud must include %q", ErrAudience, v.audience)
	}
	c := Claims{Subject: w.Sub, Expires: w.Exp.t, IssuedAt: w.Iat.t, DesiredKbps: math.NaN(), DanmakuPerHour: math.NaN(), Gift: math.NaN()}
	if w.Iss != nil {
		c.Issuer = *w.Iss
	}
	c.Audience = v.audience
	switch {
	case w.Cnet != nil:
		p, err := netip.ParsePrefix(*w.Cnet)
		if err != nil || p.Addr().Is4In6() || p.Addr().Zone() != "" {
			return Claims{}, fmt.Errorf("%w: cnet %.50q is not an IPv4 or IPv6 CIDR prefix", ErrClaims, *w.Cnet)
		}
		c.Network = p.Masked()
	case v.requireNetwork:
		return Claims{}, fmt.Errorf("%w: the token is bound to no network (cnet) and one is required", ErrNetwork)
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// signHeader and signClaims are what Sign writes.
type signHeader struct {
	Alg string `json:"alg"`
	Typ string `json:"typ"`
	Kid string `json:"kid"`
}

type signClaims struct {
	Sub            string   `json:"sub"`
	Iss            string   `json:"iss,omitempty"`
	Aud            string   `json:"aud,omitempty"`
	Exp            int64    `json:"exp"`
	Iat            *int64   `json:"iat,omitempty"`
	Cnet           string   `json:"cnet,omitempty"`
	DesiredKbps    *float64 `json:"desired_kbps,omitempty"`
	DanmakuPerHour *float64 `json:"danmaku_per_hour,omitempty"`
	Gift           *float64 `json:"gift,omitempty"`
}

// Sign issues a token, as the business platform does; used by tests, the
// lab's STBs and `schedctl token`. Expires is required; IssuedAt, Issuer,
// Audience and Network are written when set.
func Sign(k Key, c Claims) (string, error) {
	if c.Expires.IsZero() {
		return "", errors.New("token: no expiry")
	}
	w := signClaims{Sub: c.Subject, Iss: c.Issuer, Aud: c.Audience, Exp: c.Expires.Unix()}
	if !c.IssuedAt.IsZero() {
		iat := c.IssuedAt.Unix()
		w.Iat = &iat
	}
	if c.Network.IsValid() {
		w.Cnet = c.Network.Masked().String()
	}
	for _, f := range []struct {
		v   float64
		dst **float64
	}{{c.DesiredKbps, &w.DesiredKbps}, {c.DanmakuPerHour, &w.DanmakuPerHour}, {c.Gift, &w.Gift}} {
		if !math.IsNaN(f.v) {
			x := f.v
			*f.dst = &x
		}
	}
	hb, err := json.Marshal(signHeader{Alg: Alg, Typ: "JWT", Kid: k.ID})
	if err != nil {
		return "", err
	}
	cb, err := json.Marshal(w)
	if err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	si := b64.EncodeToString(hb) + "." + b64.EncodeToString(cb)
	mac := hmac.New(sha256.New, k.Secret)
	_, _ = io.WriteString(mac, si)
	return si + "." + b64.EncodeToString(mac.Sum(nil)), nil
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
