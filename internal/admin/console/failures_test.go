package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/admin/adminapi"
	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
)

const failuresProvince = `
anycast: {service_ip: 198.18.0.1, center_prefix: 198.18.0.0/26}
regions:
  - {name: hefei, location: {lat: 31.82, lon: 117.23}, fallback: [wuhu]}
  - {name: wuhu, location: {lat: 31.33, lon: 118.38}}
nodes:
  - {name: hefei-1, region: hefei, location: {lat: 31.86, lon: 117.28}, servers: [{name: a, address: 10.1.1.1:8080, capacity: {bandwidth_mbps: 100}}]}
  - {name: wuhu-1, region: wuhu, location: {lat: 31.33, lon: 118.38}, servers: [{name: w, address: 10.2.1.1:8080, capacity: {bandwidth_mbps: 10}}]}
services:
  - {name: live, hostnames: [live.iptv.example], url_template: "http://{server}/{channel}/{bitrate}", bitrates_kbps: [1200, 2500, 5000], selection: qoe}
`

// TestFailures: the QoE page plans each city's loss on request (a button,
// not on every refresh: it costs solves): hefei's 4 viewers wanting 5000
// kbps fall back to wuhu's 10 Mbps server, which holds 2 at that bitrate
// or more at less.
func TestFailures(t *testing.T) {
	st := etcdtest.Start(t).Store()
	eng := steer.New(fixture.CompileYAML(t, failuresProvince, 3), steer.Options{})
	con, err := New(Config{Service: &adminapi.Service{Store: st, Logger: quiet, Engine: func() *steer.Engine { return eng }}, Gate: adminapi.NewGate(nil, quiet),
		Loopback: true, LocalRole: authz.Viewer, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	state := &store.AllocState{Instance: "hefei-1", Made: time.Now(), Services: []store.ServiceState{{Name: "live"}}, Servers: []string{"a"}}
	for i := range 4 {
		state.Sessions = append(state.Sessions, store.SessionState{User: string(rune('a' + i)), Addr: netip.AddrFrom4([4]byte{100, 64, 1, byte(i)}),
			Channel: "ch1", Desired: 5000, Danmaku: 1, Lat: 31.86, Lon: 117.28, Server: 0, Kbps: 5000})
	}
	if err := st.PutAllocState(ctx, "hefei", state); err != nil {
		t.Fatal(err)
	}
	get := func(path string) string {
		r := httptest.NewRequest("GET", "http://localhost"+Prefix+path, nil)
		r.RemoteAddr = "127.0.0.1:4000"
		w := httptest.NewRecorder()
		con.Handler().ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, w.Code, w.Body)
		}
		return w.Body.String()
	}
	if page := get("qoe"); !strings.Contains(page, `<form id="failures-form"`) || !strings.Contains(page, `<table class="grid" id="failures">`) {
		t.Errorf("the QoE page has no failure plan form:\n%s", page)
	}
	var v FailuresView
	if err := json.Unmarshal([]byte(get("api/failures")), &v); err != nil {
		t.Fatal(err)
	}
	if v.Revision != 3 || len(v.Cities) != 1 || strings.Join(v.Idle, ",") != "wuhu" || strings.Join(v.Stale, ",") != "wuhu" {
		t.Fatalf("%+v", v)
	}
	c := v.Cities[0]
	if c.Region != "hefei" || c.Viewers != 4 || c.Order != "wuhu > center" || !strings.HasPrefix(c.TakenBy, "wuhu ") || c.Unplanned != 0 {
		t.Errorf("hefei: %+v", c)
	}
	// 10 Mbps for 4 viewers: all planned, not all at 5000 kbps.
	if !strings.HasPrefix(c.Planned, "4 of 4, ") || c.Planned == "4 of 4, 4 at desired" {
		t.Errorf("hefei planned: %q, want all 4 planned, not all at their desired 5000 kbps", c.Planned)
	}
}
