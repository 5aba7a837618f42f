package ctl

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"time"

	"github.com/anysched/anysched/internal/stb/token"
)

// tokenCmd signs a viewer token as the business platform does, for tests
// and for checking a city's auth settings by hand. It needs no scheduler.
func tokenCmd(_ context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	kid := fs.String("key-id", "", "key id (kid), as in the schedulers' alloc.keys")
	file := fs.String("secret-file", "", "file holding the key's secret (at least 32 bytes)")
	sub := fs.String("sub", "", "viewer id")
	ttl := fs.Duration("ttl", 24*time.Hour, "lifetime (iat = now, exp = now + ttl); at most the schedulers' alloc.max_token_lifetime")
	iss := fs.String("issuer", "", "iss, as the schedulers' alloc.token_issuer")
	aud := fs.String("audience", "", "aud, as the schedulers' alloc.token_audience")
	network := fs.String("network", "", "cnet: the CIDR prefix the STB must request from (e.g. 100.64.1.0/24)")
	kbps := optFloat(fs, "desired-kbps", "desired bitrate in `kbps` (unset: the scheduler's default profile)")
	dm := optFloat(fs, "danmaku-per-hour", "`N` live comments per hour (unset: left out of the token)")
	gift := optFloat(fs, "gift", "gift spend of `N` (unset: left out of the token)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if err := need("--key-id", *kid, "--secret-file", *file, "--sub", *sub); err != nil {
		return err
	}
	if *ttl <= 0 {
		return usagef("--ttl must be positive, not %s", *ttl)
	}
	var cnet netip.Prefix
	if *network != "" {
		p, err := netip.ParsePrefix(*network)
		if err != nil || p.Addr().Is4In6() {
			return usagef("--network %q is not an IPv4 or IPv6 CIDR prefix", *network)
		}
		cnet = p.Masked()
	}
	secret, err := token.ReadSecret(*file)
	if err != nil {
		return fmt.Errorf("--secret-file: %w", err)
	}
	now := e.clock.Now()
	tok, err := token.Sign(token.Key{ID: *kid, Secret: secret}, token.Claims{
		Subject: *sub, IssuedAt: now, Expires: now.Add(*ttl), Issuer: *iss, Audience: *aud, Network: cnet,
		DesiredKbps: *kbps, DanmakuPerHour: *dm, Gift: *gift,
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(e.out, tok)
	return nil
}
