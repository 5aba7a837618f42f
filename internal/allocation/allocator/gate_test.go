package allocator

import (
	"context"
	"math"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/allocation/qoe"
	"github.com/anysched/anysched/internal/stb/httpd"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/stb/token"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRung(t *testing.T) {
	ladder := []int{1200, 2500, 5000}
	for _, tt := range []struct {
		desired float64
		want    int
	}{
		{0, 5000}, {-1, 5000}, // no preference: the top
		{1, 1200}, {1200, 1200}, // below or at the lowest rung
		{1201, 2500}, {2000, 2500}, {2500, 2500}, // the lowest rung giving full quality
		{4999, 5000}, {5000, 5000}, {9000, 5000}, // above the ladder: the top
	} {
		if got := Rung(ladder, tt.desired); got != tt.want {
			t.Errorf("Rung(%v) = %d, want %d", tt.desired, got, tt.want)
		}
	}
	if got := Rung([]int{2000}, 500); got != 2000 {
		t.Errorf("one-rung ladder: %d", got)
	}
}

// gateRig serves STB requests through a Gate, as the center does.
func gateRig(t *testing.T, auth string, v *token.Verifier, reg prometheus.Registerer) (*rig, *Gate) {
	t.Helper()
	g, err := NewGate(auth, v, qoe.Profile{Danmaku: 1}, reg)
	if err != nil {
		t.Fatal(err)
	}
	eng := engine(t)
	return &rig{eng: eng, srv: httpd.New(httpd.Config{Allocator: g, InstanceID: "center"}, func() *steer.Engine { return eng }, nil, nil)}, g
}

// TestGate: the center (no plan) checks tokens like a city's scheduler and
// gives each viewer the rung it asked for, on the steer decision's server.
func TestGate(t *testing.T) {
	v, err := token.NewVerifier([]token.Key{key1}, token.Options{Leeway: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	req, reqGate := gateRig(t, AuthRequired, v, reg)
	opt, _ := gateRig(t, AuthOptional, v, nil)
	noKeys, _ := gateRig(t, AuthOptional, nil, nil)
	noDesire, _ := token.Sign(key1, token.Claims{Subject: "v", Expires: time.Now().Add(time.Hour), DesiredKbps: math.NaN(), DanmakuPerHour: math.NaN(), Gift: math.NaN()})
	expired, _ := token.Sign(key1, token.Claims{Subject: "v", Expires: time.Now().Add(-time.Hour), DesiredKbps: 2500, DanmakuPerHour: math.NaN(), Gift: math.NaN()})
	bound, _ := token.Sign(key1, token.Claims{Subject: "v", Expires: time.Now().Add(time.Hour), Network: netip.MustParsePrefix("100.64.1.0/24"), DesiredKbps: 2000, DanmakuPerHour: math.NaN(), Gift: math.NaN()})
	for _, tt := range []struct {
		name         string
		r            *rig
		client, path string
		status       int
		want         string // in the Location (302) or the body (403)
	}{
		{"desires 2000: the 2500 rung", req, "100.64.1.7", "/cctv1/index.m3u8?token=" + signed(t, "v1", 2000), 302, "/live/cctv1/2500/"},
		{"desires 800: the lowest rung", req, "100.64.1.7", "/cctv1/index.m3u8?token=" + signed(t, "v1", 800), 302, "/live/cctv1/1200/"},
		{"desires 9000: the top rung", req, "100.64.1.7", "/cctv1/index.m3u8?token=" + signed(t, "v1", 9000), 302, "/live/cctv1/5000/"},
		{"token without a desire: the top rung", req, "100.64.1.7", "/cctv1/index.m3u8?token=" + noDesire, 302, "/live/cctv1/5000/"},
		{"another city's STB: its nearest server", req, "100.64.9.7", "/cctv1/index.m3u8?token=" + signed(t, "v1", 2500), 302, "http://10.2.1.1:8080/live/cctv1/2500/"},
		{"required, missing", req, "100.64.1.7", "/cctv1/index.m3u8", 403, "token is required"},
		{"required, expired", req, "100.64.1.7", "/cctv1/index.m3u8?token=" + expired, 403, "expired"},
		{"required, tampered", req, "100.64.1.7", "/cctv1/index.m3u8?token=" + tamper(noDesire), 403, "signature does not verify"},
		{"optional, missing: default profile (top rung)", opt, "100.64.1.7", "/cctv1/index.m3u8", 302, "/live/cctv1/5000/"},
		{"optional, invalid is still refused", opt, "100.64.1.7", "/cctv1/index.m3u8?token=" + expired, 403, "expired"},
		{"optional, garbage is refused", opt, "100.64.1.7", "/cctv1/index.m3u8?token=garbage", 403, "malformed"},
		{"optional, no keys, garbage is refused", noKeys, "100.64.1.7", "/cctv1/index.m3u8?token=garbage", 403, "no token keys"},
		{"optional, no keys, a signed token is refused", noKeys, "100.64.1.7", "/cctv1/index.m3u8?token=" + noDesire, 403, "no token keys"},
		{"optional, no keys, missing: default profile", noKeys, "100.64.1.7", "/cctv1/index.m3u8", 302, "/live/cctv1/5000/"},
		{"bound to the client's network", req, "100.64.1.7", "/cctv1/index.m3u8?token=" + bound, 302, "/live/cctv1/2500/"},
		{"bound to another network", req, "100.64.9.7", "/cctv1/index.m3u8?token=" + bound, 403, "outside 100.64.1.0/24"},
		{"not a qoe service: untouched", req, "100.64.1.7", "/movie.mp4", 302, "/movie.mp4"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			host := "live.iptv.example"
			if strings.HasPrefix(tt.path, "/movie") {
				host = "vod.iptv.example"
			}
			code, loc, body := tt.r.get(tt.client, host, tt.path, "")
			got := loc
			if code != http.StatusFound {
				got = body
			}
			if code != tt.status || !strings.Contains(got, tt.want) {
				t.Fatalf("got %d, Location %q, body %q; want %d with %q", code, loc, body, tt.status, tt.want)
			}
		})
	}
	if n, err := testutil.GatherAndCount(reg, "anysched_alloc_token_rejections_total"); err != nil || n != 1+len(token.Reasons) {
		t.Errorf("registered rejection series: %d, %v (want missing + every token reason)", n, err)
	}
	for reason, want := range map[string]float64{"missing": 1, "expired": 1, "bad_signature": 1, "bad_network": 1, "malformed": 0} {
		if got := testutil.ToFloat64(reqGate.rejected.WithLabelValues(reason)); got != want {
			t.Errorf("rejections{reason=%q} = %v, want %v", reason, got, want)
		}
	}
}

func TestNewGateRefuses(t *testing.T) {
	if _, err := NewGate("sometimes", nil, qoe.Profile{}, nil); err == nil || !strings.Contains(err.Error(), `"sometimes"`) {
		t.Errorf("bad auth mode: %v", err)
	}
	if _, err := NewGate(AuthRequired, nil, qoe.Profile{}, nil); err == nil || !strings.Contains(err.Error(), "no token keys") {
		t.Errorf("required without keys: %v", err)
	}
}

// TestUnplannedAnswersGiveTheViewersRung: a city's scheduler answers another
// city's STB (which reached it by routing) and every STB before its first
// plan at the viewer's own rung, and plans only its own city's sessions.
func TestUnplannedAnswersGiveTheViewersRung(t *testing.T) {
	e := etcdtest.Start(t)
	r := newRig(t, e, engine(t), "i1", Config{})
	if _, loc, _ := r.get("100.64.1.7", "live.iptv.example", "/cctv1/index.m3u8?token="+signed(t, "own", 2000), ""); !strings.Contains(loc, "/live/cctv1/2500/") {
		t.Fatalf("before the first plan: %q, want the 2500 rung", loc)
	}
	r.a.Solve(context.Background())
	for range 3 { // planned or not, another city's STB keeps its rung and its city's server
		_, loc, _ := r.get("100.64.9.7", "live.iptv.example", "/cctv1/index.m3u8?token="+signed(t, "visitor", 2000), "")
		if !strings.HasPrefix(loc, "http://10.2.1.1:8080/live/cctv1/2500/") {
			t.Fatalf("another city's STB: %q", loc)
		}
	}
	r.a.Solve(context.Background())
	if st := r.a.Status(); st.Sessions != 1 || st.PlannedN != 1 {
		t.Fatalf("sessions %d, planned %d: want only the city's own viewer", st.Sessions, st.PlannedN)
	}
}

// tamper changes one signature character in the middle (where every
// character's bits count, so the token stays canonical base64url).
func tamper(tok string) string {
	i := len(tok) - 10
	c := byte('A')
	if tok[i] == 'A' {
		c = 'B'
	}
	return tok[:i] + string(c) + tok[i+1:]
}
