package health

import (
	"encoding/json"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// listenTCP accepts and closes connections at addr until the test ends or
// the returned listener is closed.
func listenTCP(t *testing.T, addr string) (net.Listener, netip.AddrPort) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln, netip.MustParseAddrPort(ln.Addr().String())
}

// TestCheckerProbesEachFamily: a dual-stack target's IPv6 address is
// probed beside its IPv4 one, with its own verdict: the IPv6 listener
// gone, the report says Up (IPv4) and Up6 false, with the reason.
func TestCheckerProbesEachFamily(t *testing.T) {
	_, ap4 := listenTCP(t, "127.0.0.1:0")
	ln6, ap6 := listenTCP(t, "[::1]:0")
	c := startClocked(t, CheckerOptions{Interval: time.Second}, nil, Target{Server: "dual", Address: ap4, Address6: ap6})
	both := func(r Report) bool { return r.Up && r.Up6 != nil && *r.Up6 }
	c.until(t, 1, "dual", 0, 4, both)
	ln6.Close()
	r := c.until(t, 1, "dual", 0, 10, func(r Report) bool { return r.Up && r.Up6 != nil && !*r.Up6 })
	if !strings.Contains(r.Reason6, "refused") || r.Reason != "" {
		t.Errorf("reasons: %q / %q", r.Reason, r.Reason6)
	}
}

// TestFamily6Target: the IPv6 probe of a target keeps its URL's path and
// port, with the IPv6 address as host; a single-family target has none.
func TestFamily6Target(t *testing.T) {
	base := Target{Server: "s", Address: netip.MustParseAddrPort("10.0.0.1:8080"), Address6: netip.MustParseAddrPort("[2001:db8::1]:8080")}
	for _, c := range []struct{ url, want string }{
		{"", ""},
		{"http://10.0.0.1:8080/status?x=1", "http://[2001:db8::1]:8080/status?x=1"},
		{"http://10.0.0.1/nginx_status", "http://[2001:db8::1]/nginx_status"},
	} {
		tg := base
		tg.URL = c.url
		t6, ok := tg.Family6()
		if !ok || t6.URL != c.want || t6.Address != base.Address6 || t6.Address6.IsValid() {
			t.Errorf("%q: %+v %v", c.url, t6, ok)
		}
	}
	if _, ok := (Target{Server: "s", Address: base.Address}).Family6(); ok {
		t.Error("a single-family target has an IPv6 probe")
	}
}

// TestReportFamilyCompat: Up6 is a field added beside Up, not a new
// format: a report without it means its IPv6 address is as Up says (what
// a checker before dual-stack meant), and an older reader, which knows
// only Up, reads the IPv4 verdict it always did.
func TestReportFamilyCompat(t *testing.T) {
	down := false
	b, err := json.Marshal(Report{Server: "s", Up: true, Up6: &down, Reason6: "refused", Format: ReportFormat})
	if err != nil {
		t.Fatal(err)
	}
	if ReportFormat != 1 || !strings.Contains(string(b), `"up":true`) || !strings.Contains(string(b), `"up6":false`) {
		t.Errorf("format %d, %s", ReportFormat, b)
	}
	var older struct {
		Up     bool `json:"up"`
		Format int  `json:"format"`
	}
	if err := json.Unmarshal(b, &older); err != nil || !older.Up || older.Format > 1 {
		t.Errorf("an older reader reads %+v (%v)", older, err)
	}
	var old Report
	if err := json.Unmarshal([]byte(`{"server":"s","checker":"c","up":false,"reason":"timeout"}`), &old); err != nil {
		t.Fatal(err)
	}
	if up, why := old.up6(); up || why != "timeout" {
		t.Errorf("a report without up6: IPv6 %v %q, want as up says", up, why)
	}
	if up, why := (&Report{Up: true, Up6: &down, Reason6: "refused"}).up6(); up || why != "refused" {
		t.Errorf("up6: %v %q", up, why)
	}
}
