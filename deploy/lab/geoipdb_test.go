package main

import (
	"bytes"
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/stb/geoip"
)

// lab geoip-db writes a database the schedulers accept (geoip.Check, as
// --check-config opens it) and that places its networks where it says;
// a malformed --network is refused naming it.
func TestGeoIPDB(t *testing.T) {
	out := filepath.Join(t.TempDir(), "city.mmdb")
	var stdout bytes.Buffer
	if err := run([]string{"geoip-db", "--out", out, "--network", "100.70.0.0/16=31.82,117.23,Hefei"}, &stdout); err != nil {
		t.Fatalf("geoip-db: %v\n%s", err, stdout.String())
	}
	info, err := geoip.Check(out)
	if err != nil || info.Type != "GeoLite2-City" {
		t.Fatalf("the written database: %+v, %v", info, err)
	}
	db, err := geoip.Open(out, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lat, lon, ok := db.Locate(netip.MustParseAddr("100.70.3.4")); !ok || lat != 31.82 || lon != 117.23 {
		t.Errorf("100.70.3.4 located at %v, %v (%v), want 31.82, 117.23", lat, lon, ok)
	}
	if _, _, ok := db.Locate(netip.MustParseAddr("100.71.0.1")); ok {
		t.Error("an address outside every network was located")
	}
	// Without --network: the three documentation networks.
	if err := run([]string{"geoip-db", "--out", out}, &stdout); err != nil || !strings.Contains(stdout.String(), "203.0.113.0/24") {
		t.Fatalf("geoip-db without networks: %v\n%s", err, stdout.String())
	}
	for _, bad := range []string{"10.0.0.0/8", "10.0.0.0/33=1,2", "10.0.0.0/8=91,0", "10.0.0.0/8=north,east"} {
		err := run([]string{"geoip-db", "--out", out, "--network", bad}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("--network %q: %v, want an error naming it", bad, err)
		}
	}
	if err := run([]string{"geoip-db"}, &bytes.Buffer{}); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--out") {
		t.Errorf("geoip-db without --out: %v", err)
	}
}
