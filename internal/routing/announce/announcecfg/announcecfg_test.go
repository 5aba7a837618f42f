package announcecfg

import (
	"strings"
	"testing"
)

func TestCommunityText(t *testing.T) {
	for _, s := range []string{"0:0", "65101:100", "65535:65535"} {
		c, err := ParseCommunity(s)
		if err != nil || c.String() != s {
			t.Errorf("%s: %v %v", s, c, err)
		}
	}
	for _, s := range []string{"", "1", "1:", ":1", "65536:0", "-1:2", "1:2:3"} {
		if _, err := ParseCommunity(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

// The defaults are valid, and every problem is named under the section's
// path, the section itself for the rule that spans rise and fall.
func TestValidatePaths(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate("announce."); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	c.Mode, c.CheckInterval, c.Rise, c.HoldDown, c.Drain = ModeBGP, 0, 0, -1, Drain{PreWithdraw: -1, Linger: -1}
	err := c.Validate("announce.")
	for _, want := range []string{
		"announce.bgp.asn: required in bgp mode", "announce.bgp.peers: at least one peer is required in bgp mode",
		"announce.check_interval: must be > 0", "announce: rise and fall must be >= 1", "announce.hold_down: must be >= 0",
		"announce.drain.pre_withdraw: must be >= 0", "announce.drain.linger: must be >= 0",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}
