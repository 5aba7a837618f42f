package app_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/security/pki"
	"github.com/anysched/anysched/internal/testbed/bgptest"
	"github.com/anysched/anysched/internal/wiring/config"
	"github.com/chromedp/chromedp"
	"gopkg.in/yaml.v3"
)

// chromium is Debian's Chromium (scripts/install-deps.sh).
const chromium = "/usr/bin/chromium"

// screenshotsEnv names the directory `make screenshots` has the browser
// test write the console's pages to (docs/img).
const screenshotsEnv = "ANYSCHED_CONSOLE_SCREENSHOTS"

const exampleTopology = "../../../deploy/examples/topology.yaml"

// provinceRegions are the regions of a topology document, in order.
func provinceRegions(t testing.TB, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Regions []struct {
			Name string `yaml:"name"`
		} `yaml:"regions"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range doc.Regions {
		out = append(out, r.Name)
	}
	return out
}

// browser is headless Chromium for the test, skipping it without one.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Skip("no " + chromium + " (Debian package chromium, scripts/install-deps.sh): the console's browser tests need it")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	if err := chromedp.Do(ctx); err != nil { // starts the browser: no deadline on this first call
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// run runs browser actions with a deadline.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// textOf is the visible text of the element matching sel.
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return value(t, ctx, "text of "+sel, chromedp.Text(chromedp.CSS(sel)))
}

// value runs one browser action that answers, with a deadline.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// screenshot writes the page (its first screenful) to docs/img when make
// screenshots asks.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		return
	}
	png := value(t, ctx, "screenshot "+name, chromedp.CaptureScreenshot())
	if err := os.WriteFile(filepath.Join(dir, "console-"+name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConsoleInBrowser drives the console in headless Chromium against a
// lab center and a city scheduler announcing over BGP: the province view
// lists every city; a drain made on the health page moves the city's STBs
// and an undrain brings them back; a drill started on the drills page
// withdraws the city's route, the center answers its STBs, and the
// timeline follows it back to its end.
func TestConsoleInBrowser(t *testing.T) {
	ctx := browser(t)
	router := bgptest.New(t, 65000, 65101, "")
	cc := centerConfig(t)
	cc.Lab = true
	cc.Console.LocalRole = "admin" // the drill below is started from the page, as local
	cc.HTTP.Listen = anyPort
	cc.HTTP.TrustedProxies = []config.Network{config.MustParseNetwork("127.0.0.0/8")}
	runCenter(t, &cc)
	waitUp(t, "center admin API", func() bool { _, err := schedctl(t, cc.GRPC.Listen, "status"); return err == nil })
	rc := regionalConfig(t, cc, "hefei")
	rc.HTTP.Listen = anyPort
	rc.HTTP.TrustedProxies = []config.Network{config.MustParseNetwork("127.0.0.0/8")}
	rc.Announce = bgpAnnounce(router, 65101)
	rc.Anycast.ManageAddress = false
	// The QoE page's plans: short periods, so hefei's planner reports one
	// within the test once a QoE service is applied (below).
	rc.Alloc.Period, rc.Alloc.StateInterval = time.Second, 2*time.Second
	if err := rc.Validate(); err != nil {
		t.Fatal(err)
	}
	runRegional(t, &rc)
	if out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", exampleTopology); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	hefeiSTB := func() string {
		_, loc, _ := stbGet(rc.HTTP.Listen, "live.iptv.example", "/cctv1/index.m3u8", "")
		return loc
	}
	waitUp(t, "hefei's STBs go to hefei's servers", func() bool { return strings.HasPrefix(hefeiSTB(), "http://10.1.") })
	waitUp(t, "hefei announces", func() bool { return len(router.Routes(t)) == 1 })
	base := "http://" + cc.Admin.Listen + "/console/"

	// STB load: wuhu and bengbu have no scheduler of their own, so their
	// STBs reach the center; so do some requests for a name no service
	// has; and, while hefei's route is withdrawn, hefei's STBs.
	stop := make(chan struct{})
	defer close(stop)
	go every(stop, 40*time.Millisecond, func(i int) {
		stbGet(cc.HTTP.Listen, "live.iptv.example", "/cctv1/index.m3u8", "100.68.0.9")
		if i%2 == 0 {
			stbGet(cc.HTTP.Listen, "live.iptv.example", "/cctv2/index.m3u8", "100.72.0.9")
		}
		if i%10 == 0 {
			stbGet(cc.HTTP.Listen, "unknown.example", "/x/index.m3u8", "100.68.0.9")
		}
		if len(router.Routes(t)) == 0 { // withdrawn: longest-prefix match sends hefei's STBs to the center
			stbGet(cc.HTTP.Listen, "live.iptv.example", "/cctv1/index.m3u8", "100.64.0.9")
		}
	})

	// The province: a card for every city, hefei's announced.
	regions := provinceRegions(t, exampleTopology)
	run(t, ctx, "province page", chromedp.Navigate("http://"+cc.Admin.Listen+"/"), // / sends to the console
		chromedp.WaitVisible(chromedp.CSS(`#cities article[data-city="hefei"].route-announced`)))
	cards := value(t, ctx, "count cards", chromedp.Evaluate[int](`document.querySelectorAll("#cities article.card").length`))
	if cards != len(regions) {
		t.Errorf("province view shows %d cities, want the %d of the topology", cards, len(regions))
	}
	page := textOf(t, ctx, "body")
	for _, r := range regions {
		if !strings.Contains(page, r) {
			t.Errorf("province view lacks %s", r)
		}
	}
	if who := textOf(t, ctx, "#who"); !strings.Contains(who, "local") || !strings.Contains(who, "admin") {
		t.Errorf("header says %q, want local and its role admin", who)
	}
	run(t, ctx, "map drawn", chromedp.WaitVisible(chromedp.CSS(`#map g[data-city="hefei"]`)))
	waitUp(t, "the center's record is current", func() bool { return strings.Contains(textOf(t, ctx, "#centers"), "ready") })
	run(t, ctx, "the center answers wuhu", chromedp.WaitVisible(chromedp.CSS(`#cities article.answering[data-city="wuhu"]`)))
	screenshot(t, ctx, "province")
	if os.Getenv(screenshotsEnv) != "" { // and as a phone shows it
		run(t, ctx, "phone", chromedp.EmulateViewport(390, 844))
		screenshot(t, ctx, "phone")
		run(t, ctx, "laptop", chromedp.EmulateViewport(1280, 900))
	}

	// A drain on the health page moves hefei's STBs to another city; the
	// undrain brings them back.
	run(t, ctx, "health page", chromedp.Navigate(base+"health"),
		chromedp.WaitVisible(chromedp.CSS(`button.drain[data-kind="region"][data-name="hefei"]`)))
	// A drain asks for confirmation: the operator here says yes.
	value(t, ctx, "confirm yes", chromedp.Evaluate[bool](`(window.confirm = () => true, true)`))
	// Draining a whole region is past the removal guard: the page says so
	// and drains nothing; only an admin's forced drain (schedctl drain
	// --force, which the console does not offer) empties a region.
	run(t, ctx, "drain hefei", chromedp.Click(chromedp.CSS(`button.drain[data-kind="region"][data-name="hefei"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#error`)))
	if e := textOf(t, ctx, "#error"); !strings.Contains(e, "leaves region hefei with no serving server") || !strings.Contains(e, "--force") {
		t.Errorf("the page's refusal: %q", e)
	}
	if out, err := schedctl(t, cc.GRPC.Listen, "drain", "region", "hefei", "--force"); err != nil {
		t.Fatalf("forced drain: %v\n%s", err, out)
	}
	run(t, ctx, "the forced drain listed", chromedp.WaitVisible(chromedp.CSS(`#drains button.undrain[data-name="hefei"]`)))
	waitUp(t, "hefei's STBs leave hefei", func() bool { l := hefeiSTB(); return l != "" && !strings.HasPrefix(l, "http://10.1.") })
	run(t, ctx, "drained verdicts", chromedp.WaitVisible(chromedp.CSS(`tr.v-drained`)))
	screenshot(t, ctx, "health")
	run(t, ctx, "undrain hefei", chromedp.Click(chromedp.CSS(`#drains button.undrain[data-name="hefei"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#drains button.undrain[data-name="hefei"]`)))
	waitUp(t, "hefei's STBs come back", func() bool { return strings.HasPrefix(hefeiSTB(), "http://10.1.") })

	// A drill from the drills page: hefei withdraws, the center answers
	// hefei's STBs (sent to it here, as routing would), hefei comes back.
	run(t, ctx, "drills page", chromedp.Navigate(base+"drills"), chromedp.WaitVisible(chromedp.CSS(`#drill-form`)),
		chromedp.SetValue(chromedp.CSS(`#drill-region`), "hefei"), chromedp.SetValue(chromedp.CSS(`#drill-duration`), "3"),
		chromedp.Click(chromedp.CSS(`#drill-start`)),
		chromedp.WaitVisible(chromedp.CSS(`article.run[data-target="hefei"]`)))
	waitUp(t, "the timeline shows the withdrawal and the takeover", func() bool {
		s := textOf(t, ctx, "#runs")
		return strings.Contains(s, "hefei-1 withdrew its route") && strings.Contains(s, "took the city over")
	})
	run(t, ctx, "province during the drill", chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`#cities article.route-drilled[data-city="hefei"]`)))
	screenshot(t, ctx, "drill-province")
	run(t, ctx, "back to the drill", chromedp.Navigate(base+"drills"), chromedp.WaitVisible(chromedp.CSS(`article.run[data-target="hefei"]`)))
	waitUp(t, "the drill ends", func() bool { return strings.Contains(textOf(t, ctx, "#runs"), "drill done") })
	screenshot(t, ctx, "drills")
	runs := textOf(t, ctx, "#runs")
	for _, want := range []string{"drill of hefei started by local", "hefei-1 announces again", "the city took its traffic back", "the center answered"} {
		if !strings.Contains(runs, want) {
			t.Errorf("drill timeline lacks %q:\n%s", want, runs)
		}
	}
	if len(router.Routes(t)) != 1 {
		t.Error("hefei's route is not back after the drill")
	}

	// Rates and QoE pages draw from the same province.
	run(t, ctx, "rates page", chromedp.Navigate(base+"rates"), chromedp.WaitVisible(chromedp.CSS(`#rates-table tr[data-city="hefei"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#chart-who polyline`)))
	waitUp(t, "the center's answers to wuhu per second", func() bool {
		f := strings.Fields(textOf(t, ctx, `#rates-table tr[data-city="wuhu"]`)) // wuhu center <ans/s> ...
		return len(f) > 2 && f[2] != "0.0"
	})
	if os.Getenv(screenshotsEnv) != "" {
		time.Sleep(20 * time.Second) // what must happen: the charts fill for the picture
	}
	screenshot(t, ctx, "rates")
	// A second revision (hefei's servers on another port): the history
	// lists both and the diff between them names what changed.
	doc, err := os.ReadFile(exampleTopology)
	if err != nil {
		t.Fatal(err)
	}
	// The second revision moves a server and adds a service whose servers
	// hefei's planner chooses (selection: qoe), which hefei's STBs watch.
	moved := filepath.Join(t.TempDir(), "moved.yaml")
	hd := `  - name: hd
    hostnames: [hd.iptv.example]
    url_template: http://{server}/hd/{channel}/{bitrate}/index.m3u8
    bitrates_kbps: [1100, 2000, 4500]
    selection: qoe
    match: {fleet: edge}
pools:
`
	second := strings.Replace(strings.ReplaceAll(string(doc), "10.1.1.10:8080", "10.1.1.10:9080"), "pools:\n", hd, 1)
	if err := os.WriteFile(moved, []byte(second), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", moved); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	go every(stop, 20*time.Millisecond, func(i int) {
		stbGet(rc.HTTP.Listen, "hd.iptv.example", fmt.Sprintf("/ch%d/index.m3u8", i%7), fmt.Sprintf("100.64.%d.%d", i/200%4, i%200+1))
	})
	run(t, ctx, "qoe page", chromedp.Navigate(base+"qoe"), chromedp.WaitVisible(chromedp.CSS(`#history tbody tr:nth-child(2)`)))
	waitUp(t, "hefei's plan on the QoE page", func() bool {
		return strings.Contains(textOf(t, ctx, "#plans"), "hefei") && strings.Contains(textOf(t, ctx, "#qoe-regions"), "hefei")
	})
	run(t, ctx, "diff choices", chromedp.WaitReady(chromedp.CSS(`#diff-from option:nth-child(2)`)))
	run(t, ctx, "diff", chromedp.Click(chromedp.CSS(`#diff-go`)), chromedp.WaitVisible(chromedp.CSS(`#diff p`)))
	if d := textOf(t, ctx, "#diff"); !strings.Contains(d, "hefei-1-a") || !strings.Contains(d, "address") {
		t.Errorf("the diff between the two revisions:\n%s", d)
	}
	screenshot(t, ctx, "qoe")

	// The city scheduler's console reads the same province and offers no
	// changes.
	run(t, ctx, "regional console", chromedp.Navigate("http://"+rc.Admin.Listen+"/console/health"),
		chromedp.WaitVisible(chromedp.CSS(`#servers tr[data-server]`)))
	buttons := value(t, ctx, "count buttons", chromedp.Evaluate[int](`document.querySelectorAll("button.drain, button.undrain").length`))
	if buttons != 0 {
		t.Errorf("the read-only console shows %d drain buttons", buttons)
	}
}

// consoleClient is an HTTPS client of the console with a client
// certificate, and the console's token once it has loaded a page.
type consoleClient struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

func newConsoleClient(t *testing.T, base, caFile, cert, key string) *consoleClient {
	t.Helper()
	pool := x509.NewCertPool()
	b, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(b)
	tc := &tls.Config{RootCAs: pool}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	jar := &cookieJar{}
	return &consoleClient{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: tc},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf" content="([0-9a-f]+)">`)

// get loads a page and keeps its token.
func (cc *consoleClient) get(path string) (int, string) {
	resp, err := cc.c.Get(cc.base + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if m := csrfMeta.FindSubmatch(b); m != nil {
		cc.csrf = string(m[1])
	}
	return resp.StatusCode, string(b)
}

// post submits a console form as the page's form would, from origin.
func (cc *consoleClient) post(path, origin string, form url.Values) (int, string) {
	req, _ := http.NewRequest("POST", cc.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := cc.c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// cookieJar keeps the console's session cookie (one host).
type cookieJar struct{ cs []*http.Cookie }

func (j *cookieJar) SetCookies(_ *url.URL, cs []*http.Cookie) { j.cs = append(j.cs, cs...) }
func (j *cookieJar) Cookies(*url.URL) []*http.Cookie          { return j.cs }

// TestConsoleRoles: on a mutual-TLS admin listener the console takes the
// caller from the client certificate, with the admin API's roles. A viewer
// sees no drain buttons and its drain is refused (403) even with a valid
// token; an operator's drain without the token or from another origin is
// refused, with both it goes through, and it is audited like a gRPC drain;
// a client without a certificate does not get past the handshake.
func TestConsoleRoles(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("anysched admin CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile, _, err := ca.WriteCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	srvCert, srvKey, err := ca.WriteLeaf(dir, "admin-listener", pki.Leaf{CN: "center", Hosts: []string{"127.0.0.1"}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string][2]string{}
	for name, role := range map[string]string{"vera": "viewer", "otto": "operator"} {
		cert, key, err := ca.WriteLeaf(dir, name, pki.Leaf{CN: name, Role: role, Client: true})
		if err != nil {
			t.Fatal(err)
		}
		clients[name] = [2]string{cert, key}
	}
	// The admin listener also accepts the scrapers' CA (a bundle of both);
	// its certificates carry no role on the console, whatever they say.
	metrics, err := pki.NewCA("anysched metrics CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	promCert, promKey, err := metrics.WriteLeaf(dir, "prometheus", pki.Leaf{CN: "prometheus", Role: "admin", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "admin-listener-clients.pem")
	if err := os.WriteFile(bundle, append(slices.Clone(ca.CertPEM), metrics.CertPEM...), 0o644); err != nil {
		t.Fatal(err)
	}
	cc := centerConfig(t)
	cc.Admin.TLS = config.ServerTLS{CertFile: srvCert, KeyFile: srvKey, ClientCAFile: bundle}
	cc.Console.ClientCAFile = caFile
	if err := cc.Validate(); err != nil {
		t.Fatal(err)
	}
	runCenter(t, &cc)
	waitUp(t, "center admin API", func() bool { _, err := schedctl(t, cc.GRPC.Listen, "status"); return err == nil })
	if out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", exampleTopology); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	base, origin := "https://"+cc.Admin.Listen+"/console/", "https://"+cc.Admin.Listen
	vera := newConsoleClient(t, base, caFile, clients["vera"][0], clients["vera"][1])
	otto := newConsoleClient(t, base, caFile, clients["otto"][0], clients["otto"][1])

	// Pages name the caller and its role; only the operator gets buttons.
	var body string
	waitUp(t, "the health page lists servers", func() bool {
		var code int
		code, body = otto.get("health")
		return code == http.StatusOK && strings.Contains(body, "hefei-1-a")
	})
	if !strings.Contains(body, "otto") || !strings.Contains(body, ">operator<") || !strings.Contains(body, `class="drain"`) {
		t.Errorf("operator's health page lacks its name, role or drain buttons")
	}
	code, body := vera.get("health")
	if code != http.StatusOK || !strings.Contains(body, "vera") || !strings.Contains(body, ">viewer<") {
		t.Fatalf("viewer's health page: %d\n%s", code, body)
	}
	if strings.Contains(body, `class="drain"`) || strings.Contains(body, `class="undrain"`) || strings.Contains(body, `data-can-drain="true"`) {
		t.Error("the viewer's health page offers drains")
	}
	if _, b := vera.get("drills"); strings.Contains(b, `id="drill-form"`) {
		t.Error("the viewer's drills page offers to start a drill")
	}
	prom := newConsoleClient(t, base, caFile, promCert, promKey)
	if code, body := prom.get("health"); code == http.StatusOK && (strings.Contains(body, ">admin<") || strings.Contains(body, `class="drain"`)) {
		t.Errorf("the scrapers' CA's certificate is an admin on the console: %d", code)
	}

	drain := func(c *consoleClient, origin, token string) (int, string) {
		return c.post("api/drain", origin, url.Values{"kind": {"server"}, "name": {"hefei-1-a"}, "reason": {"console test"}, "csrf": {token}})
	}
	tests := []struct {
		name     string
		c        *consoleClient
		origin   string
		token    string
		wantCode int
		want     string
	}{
		{"viewer with a valid token", vera, origin, vera.csrf, http.StatusForbidden, "Drain needs the operator role; CN=vera has the viewer role"},
		{"operator without a token", otto, origin, "", http.StatusForbidden, "token"},
		{"operator with the viewer's token", otto, origin, vera.csrf, http.StatusForbidden, "token"},
		{"operator from another origin", otto, "https://evil.example", otto.csrf, http.StatusForbidden, "cross-origin"},
		{"operator", otto, origin, otto.csrf, http.StatusSeeOther, ""},
	}
	for _, tt := range tests {
		code, body := drain(tt.c, tt.origin, tt.token)
		if code != tt.wantCode || !strings.Contains(body, tt.want) {
			t.Errorf("%s: %d %q, want %d with %q", tt.name, code, body, tt.wantCode, tt.want)
		}
	}
	// Status lists drains from the center's watch of the store: poll.
	var out string
	waitUp(t, "the operator's drain in status", func() bool {
		var err error
		out, err = schedctl(t, cc.GRPC.Listen, "status")
		return err == nil && strings.Contains(out, "console test")
	})
	// Audited as the gRPC server audits: the operator's drain, and the
	// viewer's refusal.
	out, err = schedctl(t, cc.GRPC.Listen, "audit", "-o", "json")
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	var recs struct {
		Entries []struct{ Identity, Method, Target, Code string }
	}
	if err := json.Unmarshal([]byte(out), &recs); err != nil {
		t.Fatalf("audit json: %v\n%s", err, out)
	}
	seen := map[string]bool{}
	for _, e := range recs.Entries {
		seen[e.Identity+" "+strings.TrimPrefix(e.Method, "/anysched.v1.Admin/")+" "+e.Target+" "+e.Code] = true
	}
	for _, want := range []string{"otto Drain server/hefei-1-a OK", "vera Drain  PermissionDenied"} {
		if !seen[want] {
			t.Errorf("audit lacks %q: %v", want, seen)
		}
	}

	// No certificate: no console.
	anon := newConsoleClient(t, base, caFile, "", "")
	if code, _ := anon.get(""); code != 0 {
		t.Errorf("a client without a certificate got %d", code)
	}
}

// every calls f(0), f(1), ... d apart until stop is closed: a test's
// background STB load.
func every(stop <-chan struct{}, d time.Duration, f func(i int)) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(d):
		}
		f(i)
	}
}

// A browser on the center's host is not the shell: by default the
// console's local caller is a viewer (it reads, it changes nothing), and
// a request for another name than loopback's (DNS rebinding) is refused.
func TestConsoleLocalIsViewer(t *testing.T) {
	cc := centerConfig(t)
	runCenter(t, &cc)
	base := "http://" + cc.Admin.Listen + "/console/"
	var body string
	waitUp(t, "the console", func() bool {
		resp, err := http.Get(base + "api/whoami")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK
	})
	if !strings.Contains(body, `"viewer"`) || !strings.Contains(body, `"local"`) {
		t.Fatalf("whoami for a local caller by default: %s, want local as viewer", body)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"api/whoami", nil)
	req.Host = "rebind.attacker.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("a request for another name: %d, want 421", resp.StatusCode)
	}
}
