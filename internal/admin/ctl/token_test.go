package ctl

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/token"
	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// schedctl token signs what the schedulers verify; bad use is a usage
// error; it never dials the center.
func TestToken(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "k.key")
	if err := os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short.key")
	if err := os.WriteFile(short, []byte("0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := token.NewVerifier([]token.Key{{ID: "k1", Secret: []byte("0123456789abcdef0123456789abcdef")}}, token.Options{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	sign := []string{"token", "--key-id", "k1", "--secret-file", secret, "--sub", "v1"}
	for _, tc := range []struct {
		name    string
		args    []string
		want    token.Claims // checked: subject, expiry, desired kbps
		wantErr string
		usage   bool
	}{
		{name: "default ttl", args: sign, want: token.Claims{Subject: "v1", Expires: t0.Add(24 * time.Hour)}},
		{name: "bitrate and ttl", args: append(sign, "--desired-kbps", "2500", "--ttl", "1h"), want: token.Claims{Subject: "v1", Expires: t0.Add(time.Hour), DesiredKbps: 2500}},
		{name: "no key id", args: []string{"token", "--secret-file", secret, "--sub", "v1"}, wantErr: "schedctl token: missing --key-id", usage: true},
		{name: "nothing", args: []string{"token"}, wantErr: "schedctl token: missing --key-id, --secret-file and --sub", usage: true},
		{name: "zero ttl", args: append(sign, "--ttl", "0s"), wantErr: "schedctl token: --ttl must be positive, not 0s", usage: true},
		{name: "bad kbps", args: append(sign, "--desired-kbps", "fast"), wantErr: `schedctl token: invalid value "fast" for flag -desired-kbps: parse error`, usage: true},
		{name: "bad network", args: append(sign, "--network", "100.64.1.7"), wantErr: `schedctl token: --network "100.64.1.7" is not an IPv4 or IPv6 CIDR prefix`, usage: true},
		{name: "argument", args: append(sign, "v2"), wantErr: `schedctl token: unexpected argument "v2"`, usage: true},
		{name: "short secret", args: []string{"token", "--key-id", "k1", "--secret-file", short, "--sub", "v1"},
			wantErr: "schedctl token: --secret-file: " + short + ": secret is 10 bytes, want at least 32"},
		{name: "no secret file", args: []string{"token", "--key-id", "k1", "--secret-file", filepath.Join(dir, "none"), "--sub", "v1"},
			wantErr: "schedctl token: --secret-file: open " + filepath.Join(dir, "none") + ": no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			e := testEnv(nil, &out, io.Discard)
			e.dial = func(globals) (pb.AdminClient, io.Closer, error) {
				t.Fatal("token dialed the center")
				return nil, nil, nil
			}
			err := run(context.Background(), tc.args, e)
			checkErr(t, err, tc.wantErr, tc.usage)
			if tc.wantErr != "" {
				if out.Len() != 0 {
					t.Errorf("printed %q with an error", out.String())
				}
				return
			}
			c, err := v.Verify(strings.TrimSuffix(out.String(), "\n"))
			if err != nil {
				t.Fatalf("token %q: %v", out.String(), err)
			}
			if c.Subject != tc.want.Subject || !c.Expires.Equal(tc.want.Expires) || c.DesiredKbps != tc.want.DesiredKbps && tc.want.DesiredKbps != 0 {
				t.Errorf("claims %+v, want %+v", c, tc.want)
			}
		})
	}
}

// The issuer, audience, network and lifetime flags make tokens a scheduler
// with the matching alloc settings accepts, from inside the network only.
func TestTokenBinding(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "k.key")
	if err := os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := token.NewVerifier([]token.Key{{ID: "k1", Secret: []byte("0123456789abcdef0123456789abcdef")}}, token.Options{
		Now: func() time.Time { return t0 }, Issuer: "iptv-platform", Audience: "anysched", MaxLifetime: 24 * time.Hour, RequireNetwork: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	mint := func(extra ...string) string {
		var out bytes.Buffer
		args := append([]string{"token", "--key-id", "k1", "--secret-file", secret, "--sub", "v1",
			"--issuer", "iptv-platform", "--audience", "anysched", "--network", "100.64.1.9/24"}, extra...)
		if err := run(context.Background(), args, testEnv(nil, &out, io.Discard)); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out.String())
	}
	tok := mint()
	if c, err := v.VerifyFrom(tok, netip.MustParseAddr("100.64.1.200")); err != nil || c.Network.String() != "100.64.1.0/24" || !c.IssuedAt.Equal(t0) {
		t.Fatalf("inside the network: %+v %v", c, err)
	}
	if _, err := v.VerifyFrom(tok, netip.MustParseAddr("100.64.2.1")); !errors.Is(err, token.ErrNetwork) {
		t.Fatalf("outside the network: %v", err)
	}
	if _, err := v.VerifyFrom(mint("--ttl", "25h"), netip.MustParseAddr("100.64.1.200")); !errors.Is(err, token.ErrLifetime) {
		t.Fatalf("--ttl beyond the maximum: %v", err)
	}
}

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"version"}, testEnv(nil, &out, io.Discard)); err != nil {
		t.Fatal(err)
	}
	if v, ok := strings.CutPrefix(out.String(), "schedctl "); !ok || len(strings.TrimSpace(v)) == 0 || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("version printed %q, want one line: schedctl VERSION", out.String())
	}
	if err := run(context.Background(), []string{"version", "--short"}, testEnv(nil, io.Discard, io.Discard)); err == nil || err.Error() != "schedctl version: flag provided but not defined: -short" {
		t.Errorf("version --short: %v, want a usage error", err)
	}
}
