package app_test

import (
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/mmdbtest"
	"github.com/anysched/anysched/internal/wiring/config"
)

// An STB in no coverage zone is placed by the GeoIP database (near wuhu:
// a wuhu edge), one the database does not know goes to the default region
// (hefei's scheduler: hefei), and one in a zone keeps its zone.
func TestGeoIPPlacesZonelessSTBs(t *testing.T) {
	db := filepath.Join(t.TempDir(), "city.mmdb")
	if err := mmdbtest.Write(db, []mmdbtest.Entry{{Network: netip.MustParsePrefix("203.0.113.0/24"), Lat: 31.34, Lon: 118.40, City: "Wuhu"}}); err != nil {
		t.Fatal(err)
	}
	e := etcdtest.Start(t)
	cc := centerConfig(t)
	cc.Etcd.Endpoints = []string{e.Endpoint()}
	runCenter(t, &cc)
	rc := regionalConfig(t, cc, "hefei")
	rc.Etcd.Endpoints = []string{e.Endpoint()}
	rc.GeoIP.Database = db
	rc.HTTP.Listen = anyPort
	rc.HTTP.TrustedProxies = []config.Network{config.MustParseNetwork("127.0.0.0/8")}
	if err := rc.Validate(); err != nil {
		t.Fatal(err)
	}
	runRegional(t, &rc)
	waitUp(t, "center admin API", func() bool { _, err := schedctl(t, cc.GRPC.Listen, "status"); return err == nil })
	if out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", "../../../deploy/examples/topology.yaml"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	tests := []struct{ client, want string }{
		{"203.0.113.9", "http://10.2."},  // GEO: wuhu's edges
		{"198.51.100.9", "http://10.1."}, // DEFAULT: hefei's
		{"100.68.0.9", "http://10.2."},   // CZ: wuhu's zone
	}
	for _, tc := range tests {
		waitUp(t, "redirect for "+tc.client, func() bool {
			code, loc, _ := stbGet(rc.HTTP.Listen, "live.iptv.example", "/cctv1/index.m3u8", tc.client)
			return code == 302 && strings.HasPrefix(loc, tc.want)
		})
	}
}
