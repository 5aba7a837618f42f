package topology_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
)

// TestCheckAnnounced: the last check before a route reaches a router takes
// the service host route and a center aggregate that validation accepts,
// and nothing else.
func TestCheckAnnounced(t *testing.T) {
	for _, c := range []struct {
		prefix, ip string
		want       string // "" accepted, else part of the error
	}{
		{"198.18.0.1/32", "198.18.0.1", ""},
		{"198.18.0.0/26", "198.18.0.1", ""},
		{"198.18.0.0/16", "198.18.0.1", ""},
		{"2001:db8:1::/48", "2001:db8:1::1", ""},
		{"0.0.0.0/0", "198.18.0.1", "shorter than /16"},
		{"198.0.0.0/8", "198.18.0.1", "shorter than /16"},
		{"2001:db8::/32", "2001:db8::1", "shorter than /48"},
		{"198.18.0.2/32", "198.18.0.1", "other than the service address"},
		{"198.19.0.0/26", "198.18.0.1", "does not contain"},
		{"224.0.0.5/32", "224.0.0.5", "not a unicast host address"},
		{"127.0.0.0/26", "127.0.0.1", "not a unicast host address"},
		{"255.255.255.255/32", "255.255.255.255", "not a unicast host address"},
		{"0.0.0.0/32", "0.0.0.0", "not a unicast host address"},
	} {
		err := topology.CheckAnnounced(netip.MustParsePrefix(c.prefix), netip.MustParseAddr(c.ip))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s for %s refused: %v", c.prefix, c.ip, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s for %s: %v, want an error containing %q", c.prefix, c.ip, err, c.want)
		}
	}
}
