package geoip

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/anysched/anysched/internal/testbed/logtest"
	"github.com/anysched/anysched/internal/testbed/mmdbtest"
	"github.com/anysched/anysched/internal/testbed/wait"
)

var testEntries = []mmdbtest.Entry{
	{Network: netip.MustParsePrefix("198.51.100.0/24"), Lat: 48.8566, Lon: 2.3522, City: "Paris", Country: "FR"},
	{Network: netip.MustParsePrefix("203.0.113.0/25"), Lat: -33.8688, Lon: 151.2093, City: "Sydney", Country: "AU"},
	{Network: netip.MustParsePrefix("::ffff:192.0.2.0/120"), Lat: 40.4168, Lon: -3.7038, City: "Madrid", Country: "ES"},
	{Network: netip.MustParsePrefix("2001:db8:1::/48"), Lat: 52.52, Lon: 13.405, City: "Berlin", Country: "DE"},
	{Network: netip.MustParsePrefix("2001:db8:2::/48"), Country: "US"},                   // 0,0: unknown location
	{Network: netip.MustParsePrefix("2001:db8:3::/48"), Country: "US", NoLocation: true}, // no location map
	{Network: netip.MustParsePrefix("fe80::/10"), Lat: 1.5, Lon: 2.5},
}

// writeDB writes a database to a new file and returns its path.
func writeDB(t testing.TB, d mmdbtest.Database) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "city.mmdb")
	if err := d.Write(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func open(t testing.TB, path string, reg prometheus.Registerer, opts ...Option) *DB {
	t.Helper()
	db, err := Open(path, reg, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestLocate(t *testing.T) {
	reg := prometheus.NewRegistry()
	db := open(t, writeDB(t, mmdbtest.Database{Entries: testEntries}), reg)
	tests := []struct {
		name     string
		addr     netip.Addr
		lat, lon float64
		ok       bool
	}{
		{"IPv4", netip.MustParseAddr("198.51.100.7"), 48.8566, 2.3522, true},
		{"IPv4 last of /25", netip.MustParseAddr("203.0.113.127"), -33.8688, 151.2093, true},
		{"IPv4 past /25", netip.MustParseAddr("203.0.113.128"), 0, 0, false},
		{"IPv4-mapped", netip.MustParseAddr("::ffff:198.51.100.7"), 48.8566, 2.3522, true},
		{"IPv4 inserted as mapped", netip.MustParseAddr("192.0.2.1"), 40.4168, -3.7038, true},
		{"IPv4 inserted as mapped, looked up mapped", netip.MustParseAddr("::ffff:192.0.2.1"), 40.4168, -3.7038, true},
		{"IPv6", netip.MustParseAddr("2001:db8:1::42"), 52.52, 13.405, true},
		{"IPv6 with zone", netip.MustParseAddr("fe80::1%eth0"), 1.5, 2.5, true},
		{"IPv4 not found", netip.MustParseAddr("8.8.8.8"), 0, 0, false},
		{"IPv6 not found", netip.MustParseAddr("2001:db8:ff::1"), 0, 0, false},
		{"zero location", netip.MustParseAddr("2001:db8:2::1"), 0, 0, false},
		{"no location", netip.MustParseAddr("2001:db8:3::1"), 0, 0, false},
		{"invalid", netip.Addr{}, 0, 0, false},
		{"unspecified", netip.IPv6Unspecified(), 0, 0, false},
	}
	var found, notFound float64
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lat, lon, ok := db.Locate(tt.addr)
			if lat != tt.lat || lon != tt.lon || ok != tt.ok {
				t.Errorf("Locate(%v) = %v, %v, %v; want %v, %v, %v", tt.addr, lat, lon, ok, tt.lat, tt.lon, tt.ok)
			}
		})
		if tt.ok {
			found++
		} else {
			notFound++
		}
	}
	for result, want := range map[string]float64{"found": found, "not_found": notFound, "error": 0} {
		if got := testutil.ToFloat64(db.m.lookups.WithLabelValues(result)); got != want {
			t.Errorf("lookups{result=%q} = %v, want %v", result, got, want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "anysched_geoip_lookups_total", "anysched_geoip_reloads_total",
		"anysched_geoip_database_build_timestamp_seconds"); err != nil || n != 6 {
		t.Errorf("registered series: %d, %v; want 6 (3 lookups, 2 reloads, 1 build time)", n, err)
	}
}

// rawDB writes a database whose records are built by hand, for what the
// helper will not write.
func rawDB(t *testing.T, ipVersion int, network string, rec mmdbtype.Map) string {
	t.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "Odd-City", IPVersion: ipVersion, RecordSize: 24, IncludeReservedNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	_, n, err := net.ParseCIDR(network)
	if err != nil {
		t.Fatal(err)
	}
	if err := tree.Insert(n, rec); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := tree.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "odd.mmdb")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLocateOddDatabases(t *testing.T) {
	loc := func(lat, lon mmdbtype.DataType) mmdbtype.Map {
		return mmdbtype.Map{"location": mmdbtype.Map{"latitude": lat, "longitude": lon}}
	}
	tests := []struct {
		name      string
		ipVersion int
		rec       mmdbtype.Map
		addr      string
		ok        bool
		result    string
		warnings  int
		lat, lon  float64
	}{
		{"latitude not a number", 6, loc(mmdbtype.String("north"), mmdbtype.Float64(1)), "192.0.2.1", false, "error", 1, 0, 0},
		{"location not a map", 6, mmdbtype.Map{"location": mmdbtype.String("Paris")}, "192.0.2.1", false, "error", 1, 0, 0},
		{"latitude out of range", 6, loc(mmdbtype.Float64(91), mmdbtype.Float64(1)), "192.0.2.1", false, "error", 1, 0, 0},
		{"latitude NaN", 6, loc(mmdbtype.Float64(math.NaN()), mmdbtype.Float64(1)), "192.0.2.1", false, "error", 1, 0, 0},
		{"float32 location", 6, loc(mmdbtype.Float32(10.5), mmdbtype.Float32(-20.25)), "192.0.2.1", true, "found", 0, 10.5, -20.25},
		{"IPv4-only database, IPv4", 4, loc(mmdbtype.Float64(10), mmdbtype.Float64(20)), "192.0.2.1", true, "found", 0, 10, 20},
		{"IPv4-only database, IPv6", 4, loc(mmdbtype.Float64(10), mmdbtype.Float64(20)), "2001:db8::1", false, "not_found", 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := logtest.New()
			db, err := Open(rawDB(t, tt.ipVersion, "192.0.2.0/24", tt.rec), nil, rec.Logger())
			if err != nil {
				t.Fatal(err)
			}
			for range 3 { // an unreadable record warns once, not per lookup
				lat, lon, ok := db.Locate(netip.MustParseAddr(tt.addr))
				if ok != tt.ok || lat != tt.lat || lon != tt.lon {
					t.Fatalf("Locate = %v, %v, %v; want %v, %v, %v", lat, lon, ok, tt.lat, tt.lon, tt.ok)
				}
			}
			if got := testutil.ToFloat64(db.m.lookups.WithLabelValues(tt.result)); got != 3 {
				t.Errorf("lookups{result=%q} = %v, want 3", tt.result, got)
			}
			if got := warnings(rec); got != tt.warnings {
				t.Errorf("%d warnings, want %d: %v", got, tt.warnings, rec.Records(slog.LevelWarn))
			}
		})
	}
}

func warnings(rec *logtest.Recorder) int { return len(rec.Records(slog.LevelWarn)) }

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.mmdb")
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("not a database\n"), 100), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.mmdb")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	good, err := mmdbtest.Bytes(testEntries)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.mmdb")
	if err := os.WriteFile(truncated, good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "missing.mmdb"), "no such file"},
		{"directory", dir, "is a directory"},
		{"garbage", garbage, "is not a MaxMind DB"},
		{"empty", empty, "is not a MaxMind DB"},
		{"truncated", truncated, "is not a MaxMind DB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Open(tt.path, prometheus.NewRegistry(), nil)
			if err == nil {
				t.Fatalf("Open = %v, nil; want an error", db)
			}
			if !strings.Contains(err.Error(), tt.path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not name %s and say %q", err, tt.path, tt.want)
			}
		})
	}
}

func TestOpenTwiceOnOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	path := writeDB(t, mmdbtest.Database{Entries: testEntries})
	open(t, path, reg)
	if _, err := Open(path, reg, nil); err == nil || !strings.Contains(err.Error(), "metrics") {
		t.Errorf("second Open on the same registry: %v; want a metrics error", err)
	}
}

func TestInfo(t *testing.T) {
	built := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	path := writeDB(t, mmdbtest.Database{Built: built, Entries: testEntries})
	reg := prometheus.NewRegistry()
	db := open(t, path, reg)
	i := db.Info()
	if i.Path != path || i.Type != "GeoLite2-City" || !i.Built.Equal(built) || i.Nodes == 0 || i.IPVersion != 6 || i.Loaded.IsZero() || i.ReloadError != "" {
		t.Errorf("Info = %+v", i)
	}
	if got := testutil.ToFloat64(db.m.buildTime); got != float64(built.Unix()) {
		t.Errorf("build timestamp = %v, want %v", got, built.Unix())
	}
}

func TestRunReloadsOnChange(t *testing.T) {
	path := writeDB(t, mmdbtest.Database{Entries: testEntries})
	db := open(t, path, prometheus.NewRegistry(), WithInterval(5*time.Millisecond))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- db.Run(ctx) }()

	built := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	moved := []mmdbtest.Entry{{Network: netip.MustParsePrefix("198.51.100.0/24"), Lat: 45.764, Lon: 4.8357, City: "Lyon", Country: "FR"}}
	if err := (mmdbtest.Database{Built: built, Entries: moved}).Write(path); err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddr("198.51.100.7")
	wait.For(t, "the new database in use", wait.DefaultTimeout, func() bool {
		lat, lon, ok := db.Locate(addr)
		return ok && lat == 45.764 && lon == 4.8357
	})
	if got := testutil.ToFloat64(db.m.reloadOK); got != 1 {
		t.Errorf("reloads{result=ok} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(db.m.buildTime); got != float64(built.Unix()) {
		t.Errorf("build timestamp = %v, want %v", got, built.Unix())
	}
	if _, _, ok := db.Locate(netip.MustParseAddr("2001:db8:1::1")); ok {
		t.Error("a network of the old database is still found")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

func TestFailedReloadKeepsOld(t *testing.T) {
	path := writeDB(t, mmdbtest.Database{Entries: testEntries})
	rec := logtest.New()
	db, err := Open(path, nil, rec.Logger())
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddr("198.51.100.7")
	paris := func() bool {
		lat, lon, ok := db.Locate(addr)
		return ok && lat == 48.8566 && lon == 2.3522
	}
	steps := []struct {
		name   string
		change func() error
	}{
		{"garbage", func() error { return os.WriteFile(path, []byte("garbage"), 0o644) }},
		{"removed", func() error { return os.Remove(path) }},
	}
	for _, s := range steps {
		warns, errs := warnings(rec), testutil.ToFloat64(db.m.reloadErr)
		if err := s.change(); err != nil {
			t.Fatal(err)
		}
		for range 3 { // each failure is logged and counted once, however often polled
			db.poll()
		}
		if got := warnings(rec) - warns; got != 1 {
			t.Errorf("%s: %d warnings, want 1: %v", s.name, got, rec.Records(slog.LevelWarn))
		}
		if got := testutil.ToFloat64(db.m.reloadErr) - errs; got != 1 {
			t.Errorf("%s: %v reload errors counted, want 1", s.name, got)
		}
		if !paris() {
			t.Errorf("%s: the old database is no longer answering", s.name)
		}
		if i := db.Info(); i.ReloadError == "" {
			t.Errorf("%s: Info has no reload error: %+v", s.name, i)
		}
		if err := db.Reload(); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: Reload = %v; want an error naming %s", s.name, err, path)
		}
		if !paris() {
			t.Errorf("%s: the old database is no longer answering after Reload", s.name)
		}
	}

	// A good file again is picked up, and the error clears.
	moved := []mmdbtest.Entry{{Network: netip.MustParsePrefix("198.51.100.0/24"), Lat: 1, Lon: 2}}
	if err := mmdbtest.Write(path, moved); err != nil {
		t.Fatal(err)
	}
	db.poll()
	if lat, lon, ok := db.Locate(addr); !ok || lat != 1 || lon != 2 {
		t.Errorf("after a good file: Locate = %v, %v, %v; want 1, 2, true", lat, lon, ok)
	}
	if i := db.Info(); i.ReloadError != "" {
		t.Errorf("Info after recovery: %+v", i)
	}
}

func TestLocateDuringReloads(t *testing.T) {
	versions := [][]mmdbtest.Entry{
		{{Network: netip.MustParsePrefix("198.51.100.0/24"), Lat: 10, Lon: 20}},
		{{Network: netip.MustParsePrefix("198.51.100.0/24"), Lat: 30, Lon: 40}, {Network: netip.MustParsePrefix("2001:db8::/32"), Lat: 5, Lon: 6}},
	}
	path := writeDB(t, mmdbtest.Database{Entries: versions[0]})
	db := open(t, path, prometheus.NewRegistry())
	addrs := []netip.Addr{netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("::ffff:198.51.100.1"), netip.MustParseAddr("2001:db8::1"), {}}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				a := addrs[(g+i)%len(addrs)]
				lat, lon, ok := db.Locate(a)
				valid := !ok ||
					(a.Unmap().Is4() && (lat == 10 && lon == 20 || lat == 30 && lon == 40)) ||
					(a.Is6() && !a.Is4In6() && lat == 5 && lon == 6)
				if !valid {
					select {
					case errs <- a.String():
					default:
					}
					return
				}
			}
		})
	}
	for i := range 40 {
		if err := mmdbtest.Write(path, versions[i%2]); err != nil {
			t.Fatal(err)
		}
		if err := db.Reload(); err != nil {
			t.Fatal(err)
		}
		db.Info()
	}
	close(stop)
	wg.Wait()
	close(errs)
	for a := range errs {
		t.Errorf("Locate(%s) answered from neither database", a)
	}
}

func FuzzLocate(f *testing.F) {
	path := writeDB(f, mmdbtest.Database{Entries: testEntries})
	db := open(f, path, nil)
	for _, a := range []string{"198.51.100.7", "::ffff:198.51.100.7", "2001:db8:1::1", "::", "255.255.255.255"} {
		f.Add(netip.MustParseAddr(a).AsSlice())
	}
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var b16 [16]byte
		copy(b16[:], b)
		a4, _ := netip.AddrFromSlice(b) // invalid unless 4 or 16 bytes
		for _, a := range []netip.Addr{netip.AddrFrom16(b16), netip.AddrFrom16(b16).Unmap(), a4, netip.AddrFrom16(b16).WithZone("z")} {
			lat, lon, ok := db.Locate(a)
			if ok && (math.Abs(lat) > 90 || math.Abs(lon) > 180 || lat == 0 && lon == 0) {
				t.Errorf("Locate(%v) = %v, %v, true", a, lat, lon)
			}
		}
	})
}

func BenchmarkLocate(b *testing.B) {
	db := open(b, writeDB(b, mmdbtest.Database{Entries: testEntries}), prometheus.NewRegistry())
	for _, bb := range []struct{ name, addr string }{
		{"IPv4 found", "198.51.100.7"},
		{"IPv4-mapped found", "::ffff:198.51.100.7"},
		{"IPv6 found", "2001:db8:1::42"},
		{"IPv4 not found", "8.8.8.8"},
		{"no location", "2001:db8:3::1"},
	} {
		a := netip.MustParseAddr(bb.addr)
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				db.Locate(a)
			}
		})
	}
	b.Run("parallel", func(b *testing.B) {
		a := netip.MustParseAddr("198.51.100.7")
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				db.Locate(a)
			}
		})
	})
}
