package app_test

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/stb/pathway"
	tbedge "github.com/anysched/anysched/internal/testbed/edge"
	"github.com/anysched/anysched/internal/testbed/port"
	"github.com/anysched/anysched/internal/testbed/syncbuf"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/chromedp/chromedp"
)

// hlsJS is hls.js's full build from npm, pinned and checked against the
// registry's integrity by scripts/fetch-hlsjs.sh (testdata/hlsjs/VERSION).
//
//go:embed testdata/hlsjs/hls.min.js
var hlsJS []byte

// The steering test's numbers: players on the page, the move rate and
// burst per target server, the manifest TTLs.
const (
	steerPlayers = 24
	steerRate    = 6
	// At most steerRate moves in any second; players started together
	// ask together, once a TTL, and that many of a round move at once.
	steerBurst = steerRate
	steerTTL   = 1
	steerRetry = 1
	steerHost  = "live.iptv.example"
)

// TestHLSPlayersFollowADrain: hls.js players in headless Chromium play a
// service with content steering through the scheduler's redirect from
// edge-a, a real nginx edge; an operator drains edge-a (schedctl drain,
// etcd, the regional scheduler's engine); every player moves to edge-b,
// the other nginx edge, without a stall or an error, while the scheduler
// moves at most steerRate players a second onto edge-b (its access log's
// steering lines, timed; its metric agrees).
func TestHLSPlayersFollowADrain(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skip("no " + chromium + " (Debian package chromium, scripts/install-deps.sh): the hls.js steering test plays in it")
	}
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("nginx is not installed (scripts/install-deps.sh): the hls.js steering test's edges are nginx")
	}
	if testing.Short() {
		// Its races are the daemons' and the front end's, which other tests
		// race; under the detector the players' timing would be the host's.
		t.Skip("a browser of 24 players: make test runs it plain, not under -race")
	}
	began := time.Now()
	// Two nginx edges on one port of two loopback addresses: a pathway
	// clone replaces the hostname alone, so edges differ by address.
	held := port.Hold(t)
	p := held.Port()
	addrA, addrB := fmt.Sprintf("127.0.0.2:%d", p), fmt.Sprintf("127.0.0.3:%d", p)
	dir := t.TempDir()
	segments := filepath.Join(dir, "segments")

	cc := centerConfig(t)
	runCenter(t, &cc)
	waitUp(t, "center", func() bool { _, err := schedctl(t, cc.GRPC.Listen, "status"); return err == nil })
	rc := regionalConfig(t, cc, "hefei")
	rc.HTTP.Listen = anyPort
	rc.AccessLog.Enabled, rc.AccessLog.File = true, filepath.Join(dir, "access.log")
	check := health.DefaultCheckerOptions()
	check.Interval, check.Timeout = 200*time.Millisecond, 100*time.Millisecond
	rc.Health.Embedded, rc.Health.Check = true, check
	if err := rc.Validate(); err != nil {
		t.Fatal(err)
	}
	// The scheduler's port is needed in the packager's playlist before the
	// topology is applied; it does not depend on the topology.
	runRegional(t, &rc)
	steeringURI := "http://" + steerHost + ":" + portOf(rc.HTTP.Listen) + pathway.Prefix + "/t1/multivariant.m3u8"
	for _, e := range []struct{ name, addr string }{{"a", addrA}, {"b", addrB}} {
		startNginxEdge(t, filepath.Join(dir, "edge-"+e.name), segments, e.addr, tbedge.MultivariantPlaylist([]int{730}, steeringURI))
	}
	if out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", steeringTopology(t, addrA, addrB)); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	waitUp(t, "both edges healthy", func() bool {
		out, err := schedctl(t, cc.GRPC.Listen, "status", "-o", "json")
		return err == nil && strings.Contains(out, `"healthy": 2`)
	})
	waitUp(t, "the scheduler sends the players to edge-a", func() bool {
		code, loc, _ := stbGet(rc.HTTP.Listen, steerHost, "/t1/multivariant.m3u8", "")
		return code == http.StatusFound && strings.HasPrefix(loc, "http://"+addrA+"/vod/t1/")
	})

	page := httptest.NewServer(playerPage("http://" + steerHost + ":" + portOf(rc.HTTP.Listen) + "/t1/multivariant.m3u8"))
	t.Cleanup(page.Close)
	ctx := steeringBrowser(t, rc.HTTP.Listen)
	run(t, ctx, "player page", chromedp.Navigate(page.URL))

	// Every player plays from edge-a, pinned by its first manifest.
	pollPlayers(t, ctx, "players playing from edge-a", 30*time.Second, func(p *playerState) error {
		if len(p.Steer) == 0 || p.time() < 2 || !p.loadedFrom("127.0.0.2") {
			return fmt.Errorf("player %d: %.1f s played, %d manifests, fragments from %v", p.ID, p.time(), len(p.Steer), p.hosts())
		}
		return nil
	})

	// The operator drains edge-a, as on any day.
	if out, err := schedctl(t, cc.GRPC.Listen, "drain", "server", "edge-a", "--reason", "steering test", "--force"); err != nil {
		t.Fatalf("drain: %v\n%s", err, out)
	}
	drained := time.Now()
	st := pollPlayers(t, ctx, "every player on edge-b", 40*time.Second, func(p *playerState) error {
		// Moved, and played on for 2 s from edge-b.
		if !p.loadedFrom("127.0.0.3") || p.playedSince("127.0.0.3") < 2 {
			return fmt.Errorf("player %d: fragments from %v", p.ID, p.hosts())
		}
		return nil
	})
	settled := time.Since(drained)
	hiccups := 0
	for _, p := range st {
		hiccups += len(p.hiccups())
		if gap := p.longestStill(); gap > maxStill {
			t.Errorf("player %d: currentTime stood still for %v", p.ID, gap)
		}
		// Once on edge-b, nothing more from edge-a: the move is whole.
		if p.lastFrom("127.0.0.2") > p.firstFrom("127.0.0.3") {
			t.Errorf("player %d went back to edge-a: %v", p.ID, p.Frags)
		}
	}

	// The moves, as the scheduler logged them: onto edge-b, never more
	// than steerBurst in any steerBurst/steerRate seconds (one second).
	moves, deferred := steeringLog(t, rc.AccessLog.File)
	if len(moves) < steerPlayers {
		t.Fatalf("%d moves logged for %d players", len(moves), steerPlayers)
	}
	if deferred == 0 {
		t.Errorf("no move was deferred: %d players onto one edge at %d/s should have met the limit", steerPlayers, steerRate)
	}
	// The log's times are in microseconds, the limiter's in nanoseconds.
	window := time.Duration(float64(steerBurst)/steerRate*float64(time.Second)) - 2*time.Microsecond
	maxPerSecond := 0
	for i, at := range moves {
		n := 0
		for j := i; j < len(moves) && moves[j].Sub(at) < window; j++ {
			n++
		}
		maxPerSecond = max(maxPerSecond, n)
	}
	if maxPerSecond > steerBurst {
		t.Errorf("%d moves onto edge-b within %v; the limit is %d (%d/s)", maxPerSecond, window, steerBurst, steerRate)
	}
	metric := scrape(t, rc.Admin.Listen, `anysched_steering_manifests_total{outcome="moved"}`)
	if int(metric) != len(moves) {
		t.Errorf("the metric counts %v moves, the access log %d", metric, len(moves))
	}
	t.Logf("%d hls.js players moved from edge-a to edge-b in %v after the drain (%d moves, %d deferred, at most %d in any second, limit %d/s, burst %d); no stall, no error (%d playhead hiccups with media buffered); test took %v",
		len(st), settled.Round(100*time.Millisecond), len(moves), deferred, maxPerSecond, steerRate, steerBurst, hiccups, time.Since(began).Round(100*time.Millisecond))
}

// steeringTopology: one city, two nodes of one nginx edge each; edge-a's
// node nearer the zone, so it gets the players until it is drained.
func steeringTopology(t *testing.T, addrA, addrB string) string {
	doc := fmt.Sprintf(`anycast: {service_ip: 198.18.0.1, center_prefix: 198.18.0.0/26}
regions:
  - {name: hefei, location: {lat: 31.82, lon: 117.23}}
nodes:
  - name: hefei-a
    region: hefei
    location: {lat: 31.82, lon: 117.23}
    servers: [{name: edge-a, address: "%[1]s", health: {url: "http://%[1]s/stub_status"}, capacity: {bandwidth_mbps: 1000}}]
  - name: hefei-b
    region: hefei
    location: {lat: 31.90, lon: 117.40}
    servers: [{name: edge-b, address: "%[2]s", health: {url: "http://%[2]s/stub_status"}, capacity: {bandwidth_mbps: 1000}}]
zones:
  - {name: hefei-z, region: hefei, networks: [127.0.0.0/8], location: {lat: 31.82, lon: 117.23}}
services:
  - name: live
    hostnames: [%[3]s]
    url_template: "http://{server}/vod/{channel}/multivariant.m3u8"
    bitrates_kbps: [730]
    steering: {ttl_seconds: %[4]d, retry_seconds: %[5]d, moves_per_second: %[6]d, move_burst: %[7]d, pathways: 2}
`, addrA, addrB, steerHost, steerTTL, steerRetry, steerRate, steerBurst)
	p := filepath.Join(t.TempDir(), "topology.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// startNginxEdge runs an nginx edge on addr serving the packager's
// multivariant playlist, until the test ends.
func startNginxEdge(t *testing.T, dir, segments, addr, multivariant string) {
	t.Helper()
	argv, err := tbedge.Nginx(dir, segments, addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, tbedge.MultivariantFile), []byte(multivariant), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	var log syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	wait.ForErr(t, "nginx edge on "+addr, 10*time.Second, func() error {
		resp, err := http.Get("http://" + addr + "/vod/t1/multivariant.m3u8")
		if err != nil {
			return fmt.Errorf("%v; %s", err, log.String())
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d; %s", resp.StatusCode, log.String())
		}
		return nil
	})
}

// steeringBrowser is headless Chromium resolving the service's name to the
// scheduler, as a city's DNS would the Anycast name; web security off, so
// the page's players may follow the scheduler's 302 and load from the
// edges, other origins that send no CORS headers (the steering manifest
// has them).
func steeringBrowser(t *testing.T, scheduler string) context.Context {
	t.Helper()
	host := strings.Split(scheduler, ":")[0]
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-web-security", true), chromedp.Flag("autoplay-policy", "no-user-gesture-required"),
		chromedp.Flag("host-resolver-rules", "MAP "+steerHost+" "+host),
		chromedp.WindowSize(800, 600),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// playerPage serves hls.js and a page of steerPlayers players of src,
// each recording what it loaded from where, its errors, the steering
// manifests it read and its currentTime every 250 ms, in window.players.
func playerPage(src string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hls.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		_, _ = w.Write(hlsJS)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><html><body><script src="/hls.js"></script><script>
window.players = [];
for (let i = 0; i < %d; i++) {
  const st = {id: i, frags: [], errors: [], steer: [], samples: []};
  const v = document.createElement('video');
  v.muted = true; v.autoplay = true; v.width = 32; v.height = 18;
  document.body.appendChild(v);
  const hls = new Hls({enableWorker: false, maxBufferLength: 6, maxMaxBufferLength: 8, backBufferLength: 0, startLevel: 0});
  hls.on(Hls.Events.FRAG_LOADED, (e, d) => st.frags.push([Math.round(performance.now()), new URL(d.frag.url).hostname, d.frag.sn]));
  hls.on(Hls.Events.ERROR, (e, d) => st.errors.push({details: d.details, fatal: !!d.fatal, at: Math.round(performance.now()), time: v.currentTime, buffer: d.buffer === undefined ? -1 : d.buffer}));
  hls.on(Hls.Events.STEERING_MANIFEST_LOADED, (e, d) => st.steer.push(d.steeringManifest['PATHWAY-PRIORITY'].join(',')));
  hls.loadSource(%q);
  hls.attachMedia(v);
  v.play().catch(() => {});
  setInterval(() => st.samples.push([Math.round(performance.now()), v.currentTime, v.paused || v.ended]), 250);
  window.players.push(st);
}
</script></body></html>`, steerPlayers, src)
	})
	return mux
}

// playerState is one player's record (the page's window.players[i]).
type playerState struct {
	ID      int           `json:"id"`
	Frags   [][3]any      `json:"frags"` // [ms, host, sn]
	Errors  []playerError `json:"errors"`
	Steer   []string      `json:"steer"`
	Samples [][3]any      `json:"samples"` // [ms, currentTime, paused]
}

// playerError is one ERROR event of hls.js, with the player's state then.
type playerError struct {
	Details string  `json:"details"`
	Fatal   bool    `json:"fatal"`
	At      float64 `json:"at"`     // page time, ms
	Time    float64 `json:"time"`   // currentTime
	Buffer  float64 `json:"buffer"` // seconds buffered ahead (-1: not said)
}

// hiccup: a stall reported with media buffered (see maxStill).
func (e *playerError) hiccup() bool {
	return e.Details == "bufferStalledError" && !e.Fatal && e.Buffer >= stallBuffer
}

// pollPlayers reads the players every half second (reading them costs the
// page: it must not starve the players it watches) until check holds for
// every one of them; any player's problem fails the test at once.
func pollPlayers(t *testing.T, ctx context.Context, what string, timeout time.Duration, check func(p *playerState) error) []playerState {
	t.Helper()
	var st []playerState
	var why error
	ok := wait.UntilEvery(timeout, 500*time.Millisecond, func() bool {
		st = players(t, ctx)
		why = nil
		if len(st) != steerPlayers {
			why = fmt.Errorf("%d players of %d", len(st), steerPlayers)
		}
		for i := range st {
			p := &st[i]
			if err := p.problem(); err != "" {
				t.Fatalf("player %d: %s; fragments %v", p.ID, err, p.Frags)
			}
			if err := check(p); err != nil && why == nil {
				why = err
			}
		}
		return why == nil
	})
	if !ok {
		t.Fatalf("%s: not within %v: %v", what, timeout, why)
	}
	return st
}

func players(t *testing.T, ctx context.Context) []playerState {
	t.Helper()
	raw := value(t, ctx, "read the players", chromedp.Evaluate[string](`JSON.stringify(window.players)`))
	var st []playerState
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatalf("players: %v", err)
	}
	return st
}

// maxStill is the longest the playhead may stand still once playing.
// hls.js reports a stall (bufferStalledError) after 1.25 s without
// progress; with media buffered ahead that is the host starving the
// browser of CPU (a shared CI machine), not a pathway that failed to
// deliver, so those are hiccups, bounded here, and a stall is one with
// less than stallBuffer seconds buffered: the player ran dry.
const (
	maxStill    = 3 * time.Second
	stallBuffer = 1.0
)

// problem is the first error the player reported ("" for none): a stall
// with its buffer run dry, a fatal error, any other error.
func (p *playerState) problem() string {
	for _, e := range p.Errors {
		if e.hiccup() {
			continue
		}
		return fmt.Sprintf("hls.js reported %s%s at %.0f ms (currentTime %.2f s, %.2f s buffered)", e.Details, map[bool]string{true: " (fatal)"}[e.Fatal], e.At, e.Time, e.Buffer)
	}
	return ""
}

// hiccups are the stalls reported with media buffered (see maxStill).
func (p *playerState) hiccups() []playerError {
	var out []playerError
	for _, e := range p.Errors {
		if e.hiccup() {
			out = append(out, e)
		}
	}
	return out
}

func (p *playerState) time() float64 {
	if len(p.Samples) == 0 {
		return 0
	}
	v, _ := p.Samples[len(p.Samples)-1][1].(float64)
	return v
}

func (p *playerState) hosts() []string {
	var out []string
	for _, f := range p.Frags {
		if h, _ := f[1].(string); !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

func (p *playerState) loadedFrom(host string) bool { return p.firstFrom(host) >= 0 }

// firstFrom and lastFrom are the page times (ms) of the first and last
// fragment from host; -1 when none.
func (p *playerState) firstFrom(host string) float64 {
	for _, f := range p.Frags {
		if f[1] == host {
			return f[0].(float64)
		}
	}
	return -1
}

func (p *playerState) lastFrom(host string) float64 {
	last := -1.0
	for _, f := range p.Frags {
		if f[1] == host {
			last = f[0].(float64)
		}
	}
	return last
}

// playedSince is how far currentTime advanced since the first fragment
// from host arrived.
func (p *playerState) playedSince(host string) float64 {
	at := p.firstFrom(host)
	if at < 0 {
		return 0
	}
	for _, s := range p.Samples {
		if s[0].(float64) >= at {
			return p.time() - s[1].(float64)
		}
	}
	return 0
}

// longestStill is the longest time currentTime did not advance once
// playback had begun (a stall, whatever hls.js said).
func (p *playerState) longestStill() time.Duration {
	var longest, since float64
	started := false
	last := 0.0
	for _, s := range p.Samples {
		at, ct := s[0].(float64), s[1].(float64)
		if !started {
			if ct > 0 {
				started, last, since = true, ct, at
			}
			continue
		}
		if ct > last {
			last, since = ct, at
			continue
		}
		longest = max(longest, at-since)
	}
	return time.Duration(longest * float64(time.Millisecond))
}

// steeringLog reads the scheduler's access log: the times of the moves
// onto edge-b (moved or forced) and how many moves were deferred.
func steeringLog(t *testing.T, file string) (moves []time.Time, deferred int) {
	t.Helper()
	var lines []map[string]any
	wait.ForErr(t, "the access log written", 5*time.Second, func() error {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		lines = lines[:0]
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var l map[string]any
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				return fmt.Errorf("access log line %q: %v", sc.Text(), err)
			}
			lines = append(lines, l)
		}
		if len(lines) == 0 {
			return fmt.Errorf("empty")
		}
		return sc.Err()
	})
	for _, l := range lines {
		switch l["steering"] {
		case "moved", "forced":
			if l["server"] != "edge-b" {
				t.Errorf("a move onto %v: %v", l["server"], l)
			}
			at, err := time.Parse(time.RFC3339Nano, l["ts"].(string))
			if err != nil {
				t.Fatal(err)
			}
			moves = append(moves, at)
		case "deferred":
			deferred++
		}
	}
	slices.SortFunc(moves, func(a, b time.Time) int { return a.Compare(b) })
	return moves, deferred
}

// scrape is one sample of the admin listener's metrics; -1 when absent.
func scrape(t *testing.T, admin, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return -1
}

func portOf(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }
