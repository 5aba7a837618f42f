package announcecfg

import (
	"net/netip"
	"os"
	"path/filepath"
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

// TestPeerKeys: the TCP-MD5 key comes from a private file or, as before,
// inline; the examples' placeholders, a key file others can read, an empty
// or unreadable one and a key longer than TCP-MD5 allows are refused with
// the key's path. They once reached GoBGP unchecked.
func TestPeerKeys(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good.key", "s3cr3t-md5\n", 0o600)
	for _, tc := range []struct {
		name string
		peer BGPPeer
		want string // "" : valid
		key  string
	}{
		{"no key", BGPPeer{}, "", ""},
		{"inline", BGPPeer{Password: "s3cr3t"}, "", "s3cr3t"},
		{"file", BGPPeer{PasswordFile: good}, "", "s3cr3t-md5"},
		{"placeholder inline", BGPPeer{Password: "change-me-hefei"}, "bgp.peers[0].password: a placeholder", ""},
		{"placeholder in the file", BGPPeer{PasswordFile: file("ph.key", "CHANGE_ME\n", 0o600)}, "bgp.peers[0].password_file: a placeholder", ""},
		{"both", BGPPeer{Password: "a", PasswordFile: good}, "bgp.peers[0]: password and password_file are exclusive", ""},
		{"readable by others", BGPPeer{PasswordFile: file("open.key", "s3cr3t\n", 0o644)}, "bgp.peers[0].password_file: " + filepath.Join(dir, "open.key") + " is readable by group/others", ""},
		{"empty file", BGPPeer{PasswordFile: file("empty.key", "", 0o600)}, "is empty: it holds the TCP-MD5 key", ""},
		{"missing file", BGPPeer{PasswordFile: filepath.Join(dir, "none.key")}, "bgp.peers[0].password_file: cannot read", ""},
		{"too long", BGPPeer{Password: strings.Repeat("k", 81)}, "bgp.peers[0].password: 81 bytes: TCP-MD5 keys are at most 80", ""},
	} {
		c := DefaultConfig()
		c.Mode = ModeBGP
		tc.peer.Address, tc.peer.ASN = netip.MustParseAddr("10.1.0.1"), 65101
		c.BGP = BGP{ASN: 65300, RouterID: netip.MustParseAddr("10.1.0.2"), Peers: []BGPPeer{tc.peer}}
		err := c.Validate("")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		case tc.want == "":
			if k, err := tc.peer.Key(); err != nil || k != tc.key {
				t.Errorf("%s: key %q, %v; want %q", tc.name, k, err, tc.key)
			}
		}
	}
}

// TestFamilies: announce.families names known families once each, and in
// bgp mode every family listed needs a peer of its family.
func TestFamilies(t *testing.T) {
	c := DefaultConfig()
	c.Mode = ModeBGP
	c.BGP = BGP{ASN: 65101, RouterID: netip.MustParseAddr("10.1.0.1"), Peers: []BGPPeer{{Address: netip.MustParseAddr("10.1.0.254"), ASN: 65000}}}
	c.Families = []Family{IPv4, "ipv5", IPv4, IPv6}
	err := c.Validate("announce.")
	for _, want := range []string{
		`announce.families[1]: "ipv5" is not ipv4 or ipv6`,
		"announce.families[2]: ipv4 is listed twice",
		"announce.families[3]: no ipv6 peer in announce.bgp.peers",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "families[0]") {
		t.Errorf("ipv4 with an IPv4 peer refused:\n%v", err)
	}
	// An IPv6-only city: its one peer is IPv6, its router ID still an IPv4 number.
	c.Families = []Family{IPv6}
	c.BGP.Peers = []BGPPeer{{Address: netip.MustParseAddr("fd00:1::fe"), ASN: 65000}}
	if err := c.Validate("announce."); err != nil {
		t.Fatalf("IPv6-only: %v", err)
	}
	if c.Announces(IPv4) || !c.Announces(IPv6) {
		t.Fatal("Announces does not follow families")
	}
	// OSPF mode has no peers to check; unset families announce every family.
	c = DefaultConfig()
	c.Mode = ModeOSPF
	if err := c.Validate("announce."); err != nil || !c.Announces(IPv4) || !c.Announces(IPv6) {
		t.Fatalf("ospf, no families: %v", err)
	}
}
