package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/admin/adminapi"
	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/admin/statusview"
	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
)

// TestQoEPage: the province endpoint carries every plan summary (a city
// scheduler's, a center's for a city), and with ?qoe=history each
// region's QoE with its sparklines; the QoE page draws the same. The
// cases run in order against one console over a real store: a city whose
// scheduler is gone shows that the center makes no plan for it.
func TestQoEPage(t *testing.T) {
	e := etcdtest.Start(t)
	st := e.Store()
	con, err := New(Config{Service: &adminapi.Service{Store: st, Logger: quiet}, Gate: adminapi.NewGate(nil, quiet),
		Loopback: true, LocalRole: authz.Viewer, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	h := con.Handler()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	register := func(in store.Instance) {
		in.UpdatedAt, in.StartedAt = time.Now(), time.Now().Add(-time.Hour)
		b, _ := json.Marshal(in)
		if _, err := st.Client().Put(ctx, e.Prefix+in.Key(), string(b)); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(region, id string) {
		if _, err := st.Client().Delete(ctx, e.Prefix+keyspace.Instance(region, id)); err != nil {
			t.Fatal(err)
		}
	}
	made := time.Now().Add(-time.Second)
	register(store.Instance{ID: "wuhu-1", Role: "regional", Region: "wuhu", State: "ready", Announced: true,
		QoE: &store.QoEPlan{Sessions: 400, Planned: 396, Fallback: 4, Starved: 1, Objective: 812.5, AtDesired: 0.95, Switches: 3, Drops: 1, MadeAt: made, HeldKbps: 850, CapacityKbps: 3.2e6}})
	register(store.Instance{ID: "hefei-1", Role: "regional", Region: "hefei", State: "ready", Announced: true, QoE: &store.QoEPlan{Idle: true, MadeAt: made}})
	register(store.Instance{ID: "bozhou-1", Role: "regional", Region: "bozhou", State: "ready", Announced: true, QoE: &store.QoEPlan{Sessions: 20, Planned: 20, Objective: 40, AtDesired: 1, MadeAt: made}})
	register(store.Instance{ID: "center-1", Role: "central", State: "ready", Announced: true,
		Planning: []store.QoEPlan{{Region: "bengbu", Sessions: 7, Planned: 6, Fallback: 1, Objective: 9, AtDesired: 0.5, MadeAt: made}}})

	for _, tt := range []struct {
		name     string
		before   func()
		path     string
		want     []string
		wantNot  []string
		regionsJ []string // with ?qoe=history: each region's "region: who"
	}{
		{
			name: "province: every plan summary, no history", path: "api/province",
			want:    []string{`"at_desired":0.95`, `"switches":3`, `"capacity_kbps":3200000`, `"planning":[{"region":"bengbu"`, `"idle":true`},
			wantNot: []string{`"qoe":[`, `"history"`},
		},
		{
			name: "province with the QoE history", path: "api/province?qoe=history",
			regionsJ: []string{"bengbu: center-1", "bozhou: bozhou-1", "wuhu: wuhu-1"}, // hefei-1 is idle: nobody plans hefei
		},
		{
			name: "a city's scheduler gone: the center makes no plan", before: func() { gone("bozhou", "bozhou-1") }, path: "api/province?qoe=history",
			regionsJ: []string{"bengbu: center-1", "bozhou: " + statusview.NoCenterPlan, "wuhu: wuhu-1"},
		},
		{
			name: "the QoE page", path: "qoe",
			want: []string{
				`<tr data-region="wuhu"><td>wuhu</td><td>wuhu-1</td><td>400</td>`,
				`<svg class="spark obj" viewBox="0 0 160 32" role="img">`,
				`,16.0 h0.1"/>`, // one sample, flat: mid-height
				`<span class="val">95.00%</span>`,
				`<tr data-region="bozhou" class="no-plan"><td>bozhou</td><td>center: no plan (viewers get their own rung)</td><td>-</td>`,
				`<td>bengbu</td><td>center-1</td><td>7</td><td>6</td><td>1</td><td>0</td><td>9.0</td><td>50.00%</td>`,
				`<td>wuhu</td><td>wuhu-1</td><td>400</td><td>396</td><td>4</td><td>1</td><td>812.5</td><td>95.00%</td><td>3</td><td>1</td>`,
				`850 kb/s / 3.20 Gb/s`,
			},
		},
	} {
		if tt.before != nil {
			tt.before()
		}
		r := httptest.NewRequest("GET", "http://localhost"+Prefix+tt.path, nil)
		r.RemoteAddr = "127.0.0.1:4000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		body := w.Body.String()
		if w.Code != http.StatusOK {
			t.Errorf("%s: %d %s", tt.name, w.Code, body)
			continue
		}
		for _, s := range tt.want {
			if !strings.Contains(body, s) {
				t.Errorf("%s: lacks %s\n%s", tt.name, s, body)
			}
		}
		for _, s := range tt.wantNot {
			if strings.Contains(body, s) {
				t.Errorf("%s: has %s", tt.name, s)
			}
		}
		if tt.regionsJ != nil {
			var p Province
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			var got []string
			for _, q := range p.QoE {
				got = append(got, q.Region+": "+q.Who)
				if len(q.History) == 0 || q.WindowS != qoeWindow.Seconds() {
					t.Errorf("%s: %s has %d samples over %vs", tt.name, q.Region, len(q.History), q.WindowS)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.regionsJ, "\n") {
				t.Errorf("%s: regions\n%s\nwant\n%s", tt.name, strings.Join(got, "\n"), strings.Join(tt.regionsJ, "\n"))
			}
		}
	}
}
