package dnsd

import (
	"cmp"
	"context"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/steer"
)

// TestDig asks the real dig binary, which sends what resolvers and STB
// stacks send (EDNS cookies, AD bit, its own ECS encoding).
func TestDig(t *testing.T) {
	dig, err := exec.LookPath("dig")
	if err != nil {
		t.Skip("dig not installed (apt-get install dnsutils)")
	}
	// trusted takes ECS from loopback; untrusted from nowhere (an empty,
	// non-nil list: newTestServer's default trusts loopback).
	trusted := newTestServer(t, Config{InstanceID: "sched-1"}, steer.Options{})
	untrusted := newTestServer(t, Config{TrustedResolvers: []netip.Prefix{}}, steer.Options{})
	host, port, _ := net.SplitHostPort(start(t, trusted))
	_, uport, _ := net.SplitHostPort(start(t, untrusted))
	for _, tc := range []struct {
		name string
		args []string
		want string // +short output, or a line of the full output
		port string // default: the trusted server's
	}{
		{"A", []string{"live.iptv.example", "A", "+short"}, "10.1.1.10", ""},
		{"0x20 case", []string{"LIVE.iptv.Example", "A", "+short"}, "10.1.1.10", ""},
		{"ECS south", []string{"live.iptv.example", "A", "+short", "+subnet=100.65.0.0/24"}, "10.2.1.10", ""},
		{"ECS north-b", []string{"live.iptv.example", "A", "+short", "+subnet=100.64.1.0/24"}, "10.1.2.10", ""},
		{"ECS v6 node", []string{"live.iptv.example", "AAAA", "+short", "+subnet=2001:db8:200::/56"}, "2001:db8:2::10", ""},
		{"ECS scope", []string{"live.iptv.example", "A", "+subnet=100.65.0.0/24"}, "; CLIENT-SUBNET: 100.65.0.0/24/24", ""},
		{"TCP", []string{"live.iptv.example", "A", "+short", "+tcp"}, "10.1.1.10", ""},
		{"TCP ECS", []string{"live.iptv.example", "A", "+short", "+tcp", "+subnet=100.65.0.0/24"}, "10.2.1.10", ""},
		{"NSID", []string{"live.iptv.example", "A", "+nsid"}, `; NSID: 73 63 68 65 64 2d 31 ("sched-1")`, ""},
		{"NXDOMAIN", []string{"nope.live.iptv.example", "A"}, "status: NXDOMAIN", ""},
		{"REFUSED", []string{"www.example.com", "A"}, "status: REFUSED", ""},
		{"SOA", []string{"live.iptv.example", "SOA", "+short"}, "ns1.live.iptv.example. hostmaster.live.iptv.example. 42 3600 600 86400 30", ""},
		// A /8 spans every city: the answer (100.0.0.0 is in no zone: the
		// default region) holds only for the /10 that has no zone network.
		{"ECS /8 scope", []string{"live.iptv.example", "A", "+subnet=100.0.0.0/8"}, "; CLIENT-SUBNET: 100.0.0.0/8/10", ""},
		{"ECS /16 over a nested zone", []string{"live.iptv.example", "A", "+subnet=100.66.0.0/16"}, "; CLIENT-SUBNET: 100.66.0.0/16/17", ""},
		// Not a trusted resolver: answered for the packet source, scope 0.
		{"untrusted ECS answer", []string{"live.iptv.example", "A", "+short", "+subnet=100.65.0.0/24"}, "10.1.1.10", uport},
		{"untrusted ECS scope", []string{"live.iptv.example", "A", "+subnet=100.0.0.0/8"}, "; CLIENT-SUBNET: 100.0.0.0/8/0", uport},
		// EDNS: the DO bit is copied (RFC 3225 §3), and only it.
		{"DO copied", []string{"live.iptv.example", "A", "+dnssec"}, "; EDNS: version: 0, flags: do; udp: 1232", ""},
		{"DO copied over TCP", []string{"live.iptv.example", "A", "+dnssec", "+tcp"}, "; EDNS: version: 0, flags: do; udp: 1232", ""},
		{"DO copied on NODATA", []string{"live.iptv.example", "AAAA", "+dnssec"}, "; EDNS: version: 0, flags: do; udp: 1232", ""},
		{"no DO", []string{"live.iptv.example", "A"}, "; EDNS: version: 0, flags:; udp: 1232", ""},
		{"plain DNS", []string{"live.iptv.example", "A", "+noedns", "+short"}, "10.1.1.10", ""},
		{"EDNS version 1: BADVERS", []string{"live.iptv.example", "A", "+edns=1", "+noednsnegotiation"}, "status: BADVERS", ""},
		{"unknown option ignored", []string{"live.iptv.example", "A", "+ednsopt=65001:abcd", "+short"}, "10.1.1.10", ""},
		{"unknown EDNS flag ignored", []string{"live.iptv.example", "A", "+ednsflags=0x4000"}, "; EDNS: version: 0, flags:; udp: 1232", ""},
		{"unknown type: NODATA", []string{"live.iptv.example", "TYPE65280"}, "status: NOERROR, id", ""},
		{"unknown opcode: NOTIMP", []string{"live.iptv.example", "A", "+opcode=15"}, "status: NOTIMP", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			args := append([]string{"@" + host, "-p", cmp.Or(tc.port, port), "+time=2", "+tries=2"}, tc.args...)
			out, err := exec.CommandContext(ctx, dig, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("dig %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			if !containsLine(string(out), tc.want) {
				t.Fatalf("dig %s: want a line with %q in:\n%s", strings.Join(args, " "), tc.want, out)
			}
		})
	}
}

func containsLine(out, want string) bool {
	for l := range strings.Lines(out) {
		if strings.Contains(l, want) {
			return true
		}
	}
	return false
}
