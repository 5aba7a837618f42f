package token

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// hs256 signs a signing input as is (segments already encoded).
func hs256(si string, secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(si))
	return si + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func strictVerifier(t testing.TB, o Options) *Verifier {
	t.Helper()
	if o.Now == nil {
		o.Now = func() time.Time { return now }
	}
	v, err := NewVerifier([]Key{k1}, o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func unix(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }

// Each verification rule, with hand-built tokens whose signature holds:
// only the rule can refuse them.
func TestRules(t *testing.T) {
	enc := base64.RawURLEncoding
	hdr := `{"alg":"HS256","typ":"JWT","kid":"2026-11"}`
	exp := unix(time.Hour)
	body := `{"sub":"a","exp":` + exp + `}`
	h64, c64 := enc.EncodeToString([]byte(hdr)), enc.EncodeToString([]byte(body))
	// A header segment whose last character carries non-zero unused bits:
	// it decodes to the same bytes, so a lax decoder accepts it.
	lax := []byte(h64)
	if len(h64)%4 == 0 {
		t.Fatal("the header's length leaves no unused bits; change the test header")
	}
	lax[len(lax)-1] = enc.EncodeToString([]byte{0})[0] // 'A': keep searching for a sibling
	for _, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_" {
		lax[len(lax)-1] = byte(c)
		if b, err := enc.DecodeString(string(lax)); err == nil && string(b) == hdr && string(lax) != h64 {
			break
		}
	}
	if string(lax) == h64 {
		t.Fatal("no non-canonical spelling found")
	}
	std := base64.URLEncoding // padded
	tests := []struct {
		name string
		o    Options
		tok  string
		want error
	}{
		{"baseline", Options{}, hs256(h64+"."+c64, k1.Secret), nil},
		{"crit header", Options{}, raw(t, `{"alg":"HS256","kid":"2026-11","crit":["exp"]}`, body, k1.Secret), ErrMalformed},
		{"crit header, empty", Options{}, raw(t, `{"alg":"HS256","kid":"2026-11","crit":[]}`, body, k1.Secret), ErrMalformed},
		{"exp a string", Options{}, raw(t, hdr, `{"sub":"a","exp":"`+exp+`"}`, k1.Secret), ErrClaims},
		{"iat a string", Options{}, raw(t, hdr, `{"sub":"a","exp":`+exp+`,"iat":"`+unix(0)+`"}`, k1.Secret), ErrClaims},
		{"nbf a string", Options{}, raw(t, hdr, `{"sub":"a","exp":`+exp+`,"nbf":"`+unix(0)+`"}`, k1.Secret), ErrClaims},
		{"exp null", Options{}, raw(t, hdr, `{"sub":"a","exp":null}`, k1.Secret), ErrClaims},
		{"exp fractional", Options{}, raw(t, hdr, `{"sub":"a","exp":`+exp+`.5}`, k1.Secret), nil},
		{"exp negative", Options{}, raw(t, hdr, `{"sub":"a","exp":-1}`, k1.Secret), ErrClaims},
		{"exp beyond year 9999", Options{}, raw(t, hdr, `{"sub":"a","exp":1e300}`, k1.Secret), ErrClaims},
		{"padded header", Options{}, hs256(std.EncodeToString([]byte(hdr))+"."+c64, k1.Secret), ErrMalformed},
		{"padded claims", Options{}, hs256(h64+"."+std.EncodeToString([]byte(body+" ")), k1.Secret), ErrMalformed},
		{"non-canonical trailing bits", Options{}, hs256(string(lax)+"."+c64, k1.Secret), ErrMalformed},
		{"standard alphabet", Options{}, hs256(strings.NewReplacer("-", "+", "_", "/").Replace(h64)+"x+/A."+c64, k1.Secret), ErrMalformed},
		{"newline inside", Options{}, hs256(h64[:4]+"\n"+h64[4:]+"."+c64, k1.Secret), ErrMalformed},
		{"issuer required, absent", Options{Issuer: "iptv-platform"}, raw(t, hdr, body, k1.Secret), ErrIssuer},
		{"issuer wrong", Options{Issuer: "iptv-platform"}, raw(t, hdr, `{"sub":"a","exp":`+exp+`,"iss":"someone"}`, k1.Secret), ErrIssuer},
		{"issuer right", Options{Issuer: "iptv-platform"}, raw(t, hdr, `{"sub":"a","exp":`+exp+`,"iss":"iptv-platform"}`, k1.Secret), nil},
		{"audience string", Options{Audience: "anysched"}, raw(t, hdr, `{"sub":"a","exp":`+exp+`,"aud":"anysched"}`, k1.Secret), nil},
		{"audience in an array", Options{Audience: "anysched"}, raw(t, hdr, `{"sub":"a","exp":`+exp+`,"aud":["cdn","anysched"]}`, k1.Secret), nil},
		{"audience not in the array", Options{Audience: "anysched"}, raw(t, hdr, `{"sub":"a","exp":`+exp+`,"aud":["cdn"]}`, k1.Secret), ErrAudience},
		{"audience absent", Options{Audience: "anysched"}, raw(t, hdr, body, k1.Secret), ErrAudience},
		{"audience a number", Options{Audience: "anysched"}, raw(t, hdr, `{"sub":"a","exp":`+exp+`,"aud":7}`, k1.Secret), ErrMalformed},
		{"audience given, none configured", Options{}, raw(t, hdr, `{"sub":"a","exp":`+exp+`,"aud":"cdn"}`, k1.Secret), ErrAudience},
		{"lifetime from iat", Options{MaxLifetime: 24 * time.Hour}, raw(t, hdr, `{"sub":"a","iat":`+unix(-time.Hour)+`,"exp":`+unix(24*time.Hour)+`}`, k1.Secret), ErrLifetime},
		{"lifetime from iat, at the limit", Options{MaxLifetime: 24 * time.Hour}, raw(t, hdr, `{"sub":"a","iat":`+unix(-time.Hour)+`,"exp":`+unix(23*time.Hour)+`}`, k1.Secret), nil},
		{"lifetime from now", Options{MaxLifetime: 24 * time.Hour, Leeway: 30 * time.Second}, raw(t, hdr, `{"sub":"a","exp":`+unix(24*time.Hour+time.Minute)+`}`, k1.Secret), ErrLifetime},
		{"lifetime from now, within leeway", Options{MaxLifetime: 24 * time.Hour, Leeway: 30 * time.Second}, raw(t, hdr, `{"sub":"a","exp":`+unix(24*time.Hour+20*time.Second)+`}`, k1.Secret), nil},
		{"ten years", Options{MaxLifetime: 24 * time.Hour}, raw(t, hdr, `{"sub":"a","exp":`+unix(10*365*24*time.Hour)+`}`, k1.Secret), ErrLifetime},
		{"exp before iat", Options{Leeway: 30 * time.Second}, raw(t, hdr, `{"sub":"a","iat":`+unix(10*time.Second)+`,"exp":`+unix(5*time.Second)+`}`, k1.Secret), ErrClaims},
		{"network required, absent", Options{RequireNetwork: true}, raw(t, hdr, body, k1.Secret), ErrNetwork},
		{"network required, present", Options{RequireNetwork: true}, raw(t, hdr, `{"sub":"a","exp":`+exp+`,"cnet":"100.64.1.0/24"}`, k1.Secret), nil},
		{"network not a prefix", Options{}, raw(t, hdr, `{"sub":"a","exp":`+exp+`,"cnet":"100.64.1.7"}`, k1.Secret), ErrClaims},
		{"network 4in6", Options{}, raw(t, hdr, `{"sub":"a","exp":`+exp+`,"cnet":"::ffff:100.64.1.0/120"}`, k1.Secret), ErrClaims},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := strictVerifier(t, tt.o).Verify(tt.tok)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

// A token bound to a network (cnet) is good from inside it only, also when
// the verification came from the cache.
func TestVerifyFrom(t *testing.T) {
	v := strictVerifier(t, Options{CacheSize: 16})
	tok := sign(t, k1, Claims{Subject: "a", Expires: now.Add(time.Hour), Network: netip.MustParsePrefix("100.64.1.0/24"), DesiredKbps: nan, DanmakuPerHour: nan, Gift: nan})
	for _, tc := range []struct {
		client string
		want   error
	}{
		{"100.64.1.7", nil}, {"::ffff:100.64.1.7", nil}, {"100.64.2.7", ErrNetwork}, {"100.64.1.7", nil}, {"2001:db8::1", ErrNetwork},
	} {
		_, err := v.VerifyFrom(tok, netip.MustParseAddr(tc.client))
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("from %s: %v, want %v", tc.client, err, tc.want)
		}
	}
	if _, err := v.VerifyFrom(tok, netip.Addr{}); !errors.Is(err, ErrNetwork) {
		t.Errorf("no client address: %v", err)
	}
	free := sign(t, k1, full)
	if _, err := v.VerifyFrom(free, netip.MustParseAddr("192.0.2.1")); err != nil {
		t.Errorf("unbound token: %v", err)
	}
}

// Tokens made by a common JWT library (the platform's) verify, with iss,
// an aud array, iat and cnet.
func TestInterop(t *testing.T) {
	v := strictVerifier(t, Options{Issuer: "iptv-platform", Audience: "anysched", MaxLifetime: 24 * time.Hour, RequireNetwork: true})
	tk := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "viewer-1", "iss": "iptv-platform", "aud": []string{"cdn", "anysched"},
		"iat": now.Unix(), "exp": now.Add(12 * time.Hour).Unix(), "cnet": "100.64.1.0/24", "desired_kbps": 2500,
	})
	tk.Header["kid"] = k1.ID
	s, err := tk.SignedString(k1.Secret)
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.VerifyFrom(s, netip.MustParseAddr("100.64.1.9"))
	if err != nil || c.Subject != "viewer-1" || c.DesiredKbps != 2500 || c.Network.String() != "100.64.1.0/24" || c.Issuer != "iptv-platform" {
		t.Fatalf("VerifyFrom = %+v, %v", c, err)
	}
	// And Sign's tokens pass the same verifier.
	mine := sign(t, k1, Claims{Subject: "v", Issuer: "iptv-platform", Audience: "anysched", IssuedAt: now, Expires: now.Add(24 * time.Hour),
		Network: netip.MustParsePrefix("100.64.1.0/24"), DesiredKbps: nan, DanmakuPerHour: nan, Gift: nan})
	if _, err := v.VerifyFrom(mine, netip.MustParseAddr("100.64.1.9")); err != nil {
		t.Fatalf("Sign's token: %v", err)
	}
}
