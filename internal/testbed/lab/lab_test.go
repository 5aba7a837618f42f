package lab_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/admin/ctl"
	"github.com/anysched/anysched/internal/testbed/edge"
	"github.com/anysched/anysched/internal/testbed/lab"
	"github.com/anysched/anysched/internal/testbed/wait"
)

// province brings up a lab with the real daemons, built from this tree.
func province(t testing.TB, prefix string, cities []string, standby map[int]bool) *lab.Lab {
	return provinceWith(t, prefix, lab.Options{Cities: cities, Standby: standby})
}

func provinceWith(t testing.TB, prefix string, o lab.Options) *lab.Lab {
	cities := o.Cities
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	for _, c := range []string{"ip", "bird", "birdc", "curl", "tc"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("needs %s", c)
		}
	}
	bin := t.TempDir()
	// By import path: this package's place in the tree is no business of the build.
	out, err := exec.Command("go", "build", "-o", bin+"/", "github.com/anysched/anysched/central-scheduler", "github.com/anysched/anysched/regional-scheduler", "github.com/anysched/anysched/schedctl", "github.com/anysched/anysched/deploy/lab").CombinedOutput()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	o.Prefix, o.Delay, o.Bin, o.Dir = prefix, 10*time.Millisecond, bin, dir
	l, err := lab.Up(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range []string{"center", lab.PrimaryID(cities[0]), "bird-r1", "bird-core", "etcd1", "etcd2", "etcd3"} {
				if o.EtcdMembers == 0 && strings.HasPrefix(n, "etcd") {
					continue
				}
				t.Logf("--- %s log (tail):\n%s", n, tail(l.Log(n), 3000))
			}
		}
		l.Down()
		leftover, _ := exec.Command("ip", "netns", "list").Output()
		for _, line := range splitLines(string(leftover)) {
			if len(line) > len(prefix) && line[:len(prefix)+1] == prefix+"-" {
				t.Errorf("namespace left behind: %s", line)
			}
		}
	})
	// Apply the topology through the center's admin API (once it listens).
	wait.ForErr(t, "apply", 30*time.Second, func() error {
		var b bytesBuf
		err := exec.Command("ip", "netns", "exec", prefix+"-ctr", "true").Run()
		if err == nil {
			err = runCtl(l, &b, "apply", "--yes", "-f", filepath.Join(dir, "topology.yaml"))
		}
		if err != nil {
			return fmt.Errorf("%v %s", err, b.String())
		}
		return nil
	})
	// Every city can fall back to the center before a test takes a city's
	// route away (over each family it has).
	for i := range cities {
		if !o.IPv6Only[i] {
			centerRouted(t, l, i)
		}
		if o.DualStack {
			centerRoutedVia(t, l, i, lab.CenterPrefix6)
		}
	}
	return l
}

type bytesBuf struct{ b []byte }

func (w *bytesBuf) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
func (w *bytesBuf) String() string              { return string(w.b) }

// runCtl runs schedctl inside the center's namespace (its admin API listens there).
// It presents the lab's admin certificate (mutual TLS).
func runCtl(l *lab.Lab, out *bytesBuf, args ...string) error {
	argv := append([]string{"netns", "exec", l.NS("ctr"), os.Args[0], "-test.run=^TestHelperSchedctl$", "--"}, l.SchedctlArgs()...)
	cmd := exec.Command("ip", append(argv, args...)...)
	cmd.Env = append(os.Environ(), "ANYSCHED_SCHEDCTL=1")
	b, err := cmd.CombinedOutput()
	out.b = append(out.b, b...)
	return err
}

// TestHelperSchedctl is schedctl run from inside a namespace (see runCtl).
func TestHelperSchedctl(t *testing.T) {
	if os.Getenv("ANYSCHED_SCHEDCTL") != "1" {
		return
	}
	args := helperArgs()
	err := ctl.Run(context.Background(), args, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := range len(s) {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// answeredBy waits until city i's STBs are answered by want; it returns how long that took.
func answeredBy(t testing.TB, l *lab.Lab, i int, want string, limit time.Duration) time.Duration {
	t.Helper()
	return answeredByFamily(t, l, i, want, false, limit)
}

// answeredByFamily is answeredBy over IPv4 or (v6) IPv6.
func answeredByFamily(t testing.TB, l *lab.Lab, i int, want string, v6 bool, limit time.Duration) time.Duration {
	t.Helper()
	return wait.ForErr(t, fmt.Sprintf("city %d answered by %s (IPv6 %v)", i, want, v6), limit, func() error {
		inst, code, err := l.ProbeFamily(context.Background(), i, v6)
		if err == nil && code == 302 && inst == want {
			return nil
		}
		return fmt.Errorf("last answer %q %d %v", inst, code, err)
	})
}

// loopStats is what loop's STB saw; read answers after stop (or through
// answeredSince while it runs).
type loopStats struct {
	wg      sync.WaitGroup
	quit    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	errs    []string     // the first attempts that failed, up to 5
	answers []loopAnswer // every request, in order
	bounded bool         // stopped by its own bounds, not by stop
}

// loopAnswer is one request of loop's STB, after its retry if it needed one.
type loopAnswer struct {
	at      time.Time // when the answer came
	inst    string
	ok      bool // 302
	retried bool
	what    string // status, error and duration, for failures
}

// flipAllowance is how many requests a route change may catch in flight: a
// connection whose first packets went to the old scheduler and the rest to
// the new one is reset. An STB retries it (so does loop, after 100 ms); one
// change of route should catch at most a couple.
const flipAllowance = 2

// A loop's bounds: no test needs more, and a test that fails before it
// stops its loop must not leave one running.
const (
	loopMaxRequests = 20_000
	loopMaxDuration = 3 * time.Minute
)

// loop sends requests from city i until stop is called (at the latest when
// the test ends, or at its bounds), one at a time with pause between them,
// each retried once after 100 ms as an STB would.
func loop(t testing.TB, l *lab.Lab, i int, pause time.Duration) *loopStats {
	return loopFamily(t, l, i, pause, false)
}

// loopFamily is loop over IPv4 or (v6) IPv6.
func loopFamily(t testing.TB, l *lab.Lab, i int, pause time.Duration, v6 bool) *loopStats {
	st := &loopStats{quit: make(chan struct{})}
	t.Cleanup(st.stop)
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		bound := time.Now().Add(loopMaxDuration)
		for n := 0; ; n++ {
			select {
			case <-st.quit:
				return
			default:
			}
			if n == loopMaxRequests || time.Now().After(bound) {
				st.mu.Lock()
				st.bounded = true
				st.mu.Unlock()
				return
			}
			asked := time.Now()
			inst, code, err := l.RequestFamily(context.Background(), i, v6)
			retried := err != nil || code != 302
			if retried {
				st.mu.Lock()
				if len(st.errs) < 5 {
					st.errs = append(st.errs, fmt.Sprintf("%s: %d %v", time.Now().Format("15:04:05.000"), code, err))
				}
				st.mu.Unlock()
				time.Sleep(100 * time.Millisecond) // an STB's retry delay, not a wait
				inst, code, err = l.RequestFamily(context.Background(), i, v6)
			}
			st.mu.Lock()
			st.answers = append(st.answers, loopAnswer{time.Now(), inst, err == nil && code == 302, retried, fmt.Sprintf("%q %d %v after %s", inst, code, err, time.Since(asked).Round(time.Millisecond))})
			st.mu.Unlock()
			time.Sleep(pause) // the load's pace, not a wait
		}
	}()
	return st
}

// stop ends the loop and waits for its last request.
func (st *loopStats) stop() {
	st.once.Do(func() { close(st.quit) })
	st.wg.Wait()
}

// answeredSince is how many of the loop's requests inst has answered since
// from, so far (while the loop runs).
func (st *loopStats) answeredSince(inst string, from time.Time) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	n := 0
	for _, a := range st.answers {
		if a.ok && a.inst == inst && !a.at.Before(from) {
			n++
		}
	}
	return n
}

// waitAnswers waits until inst has answered n of the loop's requests since
// from.
func (st *loopStats) waitAnswers(t testing.TB, inst string, n int, from time.Time, limit time.Duration) {
	t.Helper()
	wait.For(t, fmt.Sprintf("%d answers by %s", n, inst), limit, func() bool { return st.answeredSince(inst, from) >= n })
}

// counts: requests, those that needed their retry, those that failed after it.
func (st *loopStats) counts() (total, retried, failed int) {
	for _, a := range st.answers {
		total++
		if a.retried {
			retried++
		}
		if !a.ok {
			failed++
		}
	}
	return
}

// answeredBy returns how many of loop's requests inst answered.
func (st *loopStats) answeredBy(inst string) int {
	n := 0
	for _, a := range st.answers {
		if a.ok && a.inst == inst {
			n++
		}
	}
	return n
}

// check fails t if a request failed after its retry, or more than one
// route change's worth needed the retry, or the loop ran into its bounds.
func (st *loopStats) check(t *testing.T, what string) {
	t.Helper()
	if st.bounded {
		t.Errorf("%s: the request loop stopped at its bounds (%d requests, %s)", what, loopMaxRequests, loopMaxDuration)
	}
	total, retried, failed := st.counts()
	t.Logf("%s: %d requests, %d needed their retry %v, %d failed", what, total, retried, st.errs, failed)
	if failed != 0 || retried > flipAllowance {
		t.Errorf("%s: %d of %d requests failed after a retry, %d needed one (at most %d expected)", what, failed, total, retried, flipAllowance)
	}
}

// TestPrivilegedAnycastFailover is the deployment report's design end to end: three
// cities with BIRD routers, regional schedulers announcing the service /32
// over BGP, the center announcing the /26; STBs reach their own city's
// scheduler, and the center when that one is gone.
func TestPrivilegedAnycastFailover(t *testing.T) {
	cities := []string{"hefei", "wuhu", "bengbu"}
	l := province(t, "asf", cities, nil)
	for i, c := range cities {
		d := answeredBy(t, l, i, lab.PrimaryID(c), 60*time.Second)
		t.Logf("%s: answered by its own scheduler after %s", c, d.Round(time.Millisecond))
	}

	// kill -9: the BGP session dies with the process, the city falls back to the center.
	p := l.Proc(lab.PrimaryID("hefei"))
	p.Signal(syscall.SIGKILL)
	p.Wait(5 * time.Second)
	d := answeredBy(t, l, 0, lab.CenterID, 10*time.Second)
	t.Logf("kill -9 of hefei's scheduler: the center answers after %s", d.Round(time.Millisecond))
	if inst, _, _ := l.Request(context.Background(), 1); inst != lab.PrimaryID("wuhu") {
		t.Errorf("wuhu's STBs moved too: answered by %q", inst)
	}
	if err := l.Restart(lab.PrimaryID("hefei")); err != nil {
		t.Fatal(err)
	}
	d = answeredBy(t, l, 0, lab.PrimaryID("hefei"), 30*time.Second)
	t.Logf("restart: hefei answers its STBs again after %s", d.Round(time.Millisecond))

	// SIGSTOP: a frozen scheduler would keep its session until the hold
	// time (3 s) expires; its watchdog (800 ms, the units' WatchdogSec) kills
	// it first, the session closes with it, and the center answers.
	p = l.Proc(lab.PrimaryID("wuhu"))
	p.Signal(syscall.SIGSTOP)
	d = answeredBy(t, l, 1, lab.CenterID, 10*time.Second)
	t.Logf("SIGSTOP of wuhu's scheduler: the center answers after %s (watchdog 800ms, hold time 3s)", d.Round(time.Millisecond))
	if !p.Wait(5*time.Second) || l.WatchdogFired(lab.PrimaryID("wuhu")).IsZero() {
		t.Fatal("the frozen scheduler was not killed by its watchdog")
	}
	if d >= 3*time.Second {
		t.Errorf("frozen scheduler: the center took over after %s, not before the hold time (3s): the route moved on the hold timer, not the watchdog", d)
	}
	if err := l.Restart(lab.PrimaryID("wuhu")); err != nil {
		t.Fatal(err)
	}
	answeredBy(t, l, 1, lab.PrimaryID("wuhu"), 30*time.Second)

	// SIGTERM under load: GRACEFUL_SHUTDOWN, withdraw, drain: no STB request fails.
	begin := time.Now()
	st := loop(t, l, 2, 0)
	st.waitAnswers(t, lab.PrimaryID("bengbu"), 5, begin, wait.DefaultTimeout)
	p = l.Proc(lab.PrimaryID("bengbu"))
	p.Signal(syscall.SIGTERM)
	if !p.Wait(15 * time.Second) {
		t.Fatal("bengbu's scheduler did not stop within 15s")
	}
	st.waitAnswers(t, lab.CenterID, 5, begin, wait.DefaultTimeout)
	st.stop()
	st.check(t, "SIGTERM of bengbu's scheduler under load")
	if st.answeredBy(lab.CenterID) == 0 {
		t.Error("the center never took over bengbu's STBs")
	}

	// Readiness: hefei's own servers all unavailable -> hefei keeps its /32
	// (it sends its STBs to a fallback region); nothing available anywhere
	// -> it withdraws and says why.
	var out bytesBuf
	if err := runCtl(l, &out, "drain", "region", "hefei", "--force"); err != nil {
		t.Fatalf("drain: %v %s", err, out.String())
	}
	// The drain in force at hefei's scheduler: its STBs go to a fallback
	// region's servers.
	var hefeiServers []string
	for _, n := range l.Topo.Nodes {
		for _, sv := range n.Servers {
			if n.Region == "hefei" {
				hefeiServers = append(hefeiServers, sv.Address)
			}
		}
	}
	wait.ForErr(t, "hefei's STBs redirected to a fallback region", wait.DefaultTimeout, func() error {
		loc, err := l.Redirect(context.Background(), 0)
		if err == nil && (loc == "" || containsAny(loc, hefeiServers...)) {
			err = fmt.Errorf("redirected to %q", loc)
		}
		return err
	})
	// And hefei keeps its route. A withdrawal would follow within the
	// announce check's fall (2 x 100 ms) and a BGP update: hefei's
	// scheduler must answer every request for a second after that (part
	// of what is tested: a withdrawal that does not happen has no event).
	for n, from := 0, time.Now(); n < 5 || (time.Since(from) < time.Second && n < 200); n++ {
		if inst, code, err := l.Request(context.Background(), 0); inst != lab.PrimaryID("hefei") || code != 302 {
			t.Fatalf("hefei drained, request %d: answered by %q (%d, %v), want hefei's scheduler redirecting to a fallback region", n, inst, code, err)
		}
	}
	for _, c := range cities[1:] {
		if err := runCtl(l, &out, "drain", "region", c, "--force"); err != nil {
			t.Fatalf("drain: %v %s", err, out.String())
		}
	}
	wait.ForErr(t, "hefei withdrawing with nothing to serve", 15*time.Second, func() error {
		out = bytesBuf{}
		runCtl(l, &out, "status")
		if !containsAll(out.String(), "hefei-1", "withdrawn: no available server in any region") {
			return fmt.Errorf("status:\n%s", out.String())
		}
		return nil
	})
	for _, c := range cities {
		runCtl(l, &out, "undrain", "region", c)
	}
	answeredBy(t, l, 0, lab.PrimaryID("hefei"), 20*time.Second)
}

// TestPrivilegedPrimaryStandby: two schedulers in one city announce; the
// standby's path is worse (MED 200, AS-path prepend), so the router prefers
// the primary, and moves to the standby when the primary withdraws.
func TestPrivilegedPrimaryStandby(t *testing.T) {
	l := province(t, "asp", []string{"hefei"}, map[int]bool{0: true})
	answeredBy(t, l, 0, lab.PrimaryID("hefei"), 60*time.Second)
	// Both sessions up and both announcing.
	wait.ForErr(t, "the router seeing both schedulers' routes", 20*time.Second, func() error {
		if out := l.Birdc("r1", "show", "route", "for", "198.18.0.1", "all"); !containsAll(out, "10.1.2.2", "10.1.3.2") {
			return fmt.Errorf("\n%s", out)
		}
		return nil
	})
	st := loop(t, l, 0, 0)
	p := l.Proc(lab.PrimaryID("hefei"))
	p.Signal(syscall.SIGTERM)
	p.Wait(15 * time.Second)
	answeredBy(t, l, 0, lab.StandbyID("hefei"), 10*time.Second)
	st.stop()
	st.check(t, "primary stop")
	if st.answeredBy(lab.StandbyID("hefei")) == 0 {
		t.Error("primary stop: the standby answered nothing")
	}
	if n := st.answeredBy(lab.CenterID); n != 0 {
		t.Errorf("the center answered %d requests although the standby was there", n)
	}
}

// reportAt is the time (+seconds) of the last line of a drill report that
// says what; 0 if none does.
func reportAt(report, what string) float64 {
	var at float64
	for _, line := range splitLines(report) {
		var secs float64
		if _, err := fmt.Sscanf(strings.TrimLeft(line, " +"), "%fs", &secs); err == nil && containsAll(line, what) {
			at = secs
		}
	}
	return at
}

// containsAny reports whether s contains one of subs.
func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		found := false
		for i := 0; i+len(x) <= len(s); i++ {
			if s[i:i+len(x)] == x {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// TestPrivilegedOSPFFailover: the same longest-prefix failover with
// announce.mode ospf: the scheduler puts the /32 on anycast0 and the host's
// BIRD advertises it to the city router over OSPF.
func TestPrivilegedOSPFFailover(t *testing.T) {
	cities := []string{"hefei", "wuhu"}
	// Dual-stack: each host's BIRD runs OSPFv3 beside OSPFv2 and advertises
	// the /128 beside the /32.
	l := provinceWith(t, "aso", lab.Options{Cities: cities, OSPF: true, DualStack: true})
	for i, c := range cities {
		d := answeredBy(t, l, i, lab.PrimaryID(c), 90*time.Second)
		d6 := answeredByFamily(t, l, i, lab.PrimaryID(c), true, 30*time.Second)
		t.Logf("%s: answered by its own scheduler (OSPF) after %s, over IPv6 (OSPFv3) %s later", c, d.Round(time.Millisecond), d6.Round(time.Millisecond))
	}
	// Planned stop: the address goes, OSPF withdraws, the drain covers
	// the convergence: no request fails.
	begin := time.Now()
	st := loop(t, l, 0, 0)
	st.waitAnswers(t, lab.PrimaryID("hefei"), 3, begin, wait.DefaultTimeout)
	p := l.Proc(lab.PrimaryID("hefei"))
	p.Signal(syscall.SIGTERM)
	if !p.Wait(20 * time.Second) {
		t.Fatal("hefei's scheduler did not stop")
	}
	st.stop()
	st.check(t, "SIGTERM (OSPF)")
	if st.answeredBy(lab.CenterID) == 0 {
		t.Error("planned stop in OSPF mode: the center never answered")
	}
	if err := l.Restart(lab.PrimaryID("hefei")); err != nil {
		t.Fatal(err)
	}
	d := answeredBy(t, l, 0, lab.PrimaryID("hefei"), 30*time.Second)
	t.Logf("restart (OSPF): hefei answers again after %s", d.Round(time.Millisecond))

	// kill -9 leaves the address behind; the unit's ExecStopPost (--cleanup)
	// removes it, and OSPF hands the city to the center.
	p = l.Proc(lab.PrimaryID("wuhu"))
	killed := time.Now()
	p.Signal(syscall.SIGKILL)
	p.Wait(5 * time.Second)
	if out, err := l.Cleanup(1); err != nil {
		t.Fatalf("--cleanup: %v\n%s", err, out)
	}
	d = answeredBy(t, l, 1, lab.CenterID, 20*time.Second)
	answeredByFamily(t, l, 1, lab.CenterID, true, 20*time.Second)
	t.Logf("kill -9 + --cleanup (OSPF): the center answers after %s (IPv4), both families by %s after the kill", d.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))

	// A frozen scheduler in OSPF mode has no session to lose: the host's
	// BIRD would advertise its address for ever. Its watchdog kills it and
	// cleans up (the units' ExecStopPost), and OSPF withdraws the address.
	wuhu := lab.PrimaryID("wuhu")
	if err := l.Restart(wuhu); err != nil {
		t.Fatal(err)
	}
	answeredBy(t, l, 1, wuhu, 30*time.Second)
	p = l.Proc(wuhu)
	p.Signal(syscall.SIGSTOP)
	d = answeredBy(t, l, 1, lab.CenterID, 20*time.Second)
	t.Logf("SIGSTOP (OSPF): the watchdog kills it, the center answers after %s", d.Round(time.Millisecond))
	if !p.Wait(5*time.Second) || l.WatchdogFired(wuhu).IsZero() {
		t.Fatal("OSPF mode: the frozen scheduler was not killed by its watchdog")
	}

	// A host hung whole (its routing daemon frozen with the scheduler):
	// the city router's BFD (100 ms x 3) drops the adjacency before OSPF's
	// dead interval (3 s) would.
	if err := l.Restart(wuhu); err != nil {
		t.Fatal(err)
	}
	answeredBy(t, l, 1, wuhu, 30*time.Second)
	host := l.Proc("bird-s2")
	host.Signal(syscall.SIGSTOP)
	l.Proc(wuhu).Signal(syscall.SIGSTOP)
	d = answeredBy(t, l, 1, lab.CenterID, 20*time.Second)
	t.Logf("wuhu's host hung (BIRD and scheduler SIGSTOP, OSPF with BFD): the center answers after %s", d.Round(time.Millisecond))
	if d >= 3*time.Second {
		t.Errorf("a hung host's city went to the center after %s, not before OSPF's dead interval (3s): BFD did not drop it", d)
	}
	host.Signal(syscall.SIGCONT)
}

// TestPrivilegedLabDrill: a failover drill of one city under STB load, and
// the drill's own report checked against what the STBs saw. The lab is
// dual-stack: an IPv4 and an IPv6 STB (curl -4 and -6 to the two service
// addresses) load the drilled city, and both families must move to the
// center's aggregate and back, each within the reported withdrawal.
//
// Its third city, bengbu, is IPv6-only: no IPv4 on its links, STBs or
// scheduler, which announces the /128 alone; its IPv6 STBs reach it, and
// the center's IPv6 aggregate through a drill of their own.
func TestPrivilegedLabDrill(t *testing.T) {
	cities := []string{"hefei", "wuhu", "bengbu"}
	l := provinceWith(t, "asd", lab.Options{Cities: cities, DualStack: true, IPv6Only: map[int]bool{2: true}})
	for i, c := range cities {
		if i < 2 {
			answeredBy(t, l, i, lab.PrimaryID(c), 60*time.Second)
		}
		d := answeredByFamily(t, l, i, lab.PrimaryID(c), true, 60*time.Second)
		t.Logf("%s's IPv6 STB answered by its scheduler %s later", c, d.Round(time.Millisecond))
	}
	// Each family's STB is sent to an edge address of its own family;
	// bengbu's servers have IPv6 alone.
	for _, c := range []struct {
		city int
		v6   bool
		want string
	}{{0, false, "http://10."}, {0, true, "http://[fd00:1:5::"}, {1, true, "http://[fd00:2:5::"}, {2, true, "http://[fd00:3:5::"}} {
		loc, err := l.RedirectFamily(context.Background(), c.city, c.v6)
		if err != nil || !strings.HasPrefix(loc, c.want) {
			t.Errorf("%s's STB (IPv6 %v) sent to %q (%v), want %s...", cities[c.city], c.v6, loc, err, c.want)
		}
	}
	// bengbu has no IPv4: an IPv4 request cannot leave its STBs, and its
	// scheduler announces (and exports) its IPv6 route alone.
	if inst, code, err := l.RequestFamily(context.Background(), 2, false); err == nil && code != 0 {
		t.Errorf("bengbu's STB namespace answered over IPv4: %q %d", inst, code)
	}
	wait.ForErr(t, "bengbu announces its /128 alone", wait.DefaultTimeout, func() error {
		m, err := l.Metrics(context.Background(), 2)
		if err == nil && strings.Contains(m, `anysched_announce_state{family="ipv6"} 1`) && !strings.Contains(m, `anysched_announce_state{family="ipv4"}`) {
			return nil
		}
		return fmt.Errorf("metrics: %v %s", err, grepLines(m, "anysched_announce_state"))
	})
	// Both routes announced, each counted on its own.
	wait.ForErr(t, "wuhu announces both families", wait.DefaultTimeout, func() error {
		m, err := l.Metrics(context.Background(), 1)
		if err == nil && strings.Contains(m, `anysched_announce_state{family="ipv4"} 1`) && strings.Contains(m, `anysched_announce_state{family="ipv6"} 1`) {
			return nil
		}
		return fmt.Errorf("metrics: %v %s", err, grepLines(m, "anysched_announce_state"))
	})
	fams := []struct {
		name string
		st   *loopStats
	}{{"IPv4", loopFamily(t, l, 1, 20*time.Millisecond, false)}, {"IPv6", loopFamily(t, l, 1, 20*time.Millisecond, true)}}
	for _, f := range fams {
		f.st.waitAnswers(t, lab.PrimaryID("wuhu"), 10, time.Time{}, wait.DefaultTimeout) // before the drill
	}
	start := time.Now()
	var out bytesBuf
	if err := runCtl(l, &out, "drill", "failover", "--region", "wuhu", "--duration", "5s"); err != nil {
		t.Fatalf("drill: %v\n%s", err, out.String())
	}
	for _, f := range fams {
		f.st.waitAnswers(t, lab.PrimaryID("wuhu"), 10, time.Now(), wait.DefaultTimeout) // after it
		f.st.stop()
	}
	t.Logf("drill report:\n%s", out.String())

	withdrawAt, backAt := reportAt(out.String(), "withdrew its route"), reportAt(out.String(), "announces again")
	if withdrawAt == 0 && backAt == 0 {
		t.Fatalf("no timeline in the drill report:\n%s", out.String())
	}
	var retried, byCenter int
	var firstCenter, lastCenter time.Duration
	for _, f := range fams {
		var failed, fRetried, fCenter, byCity int
		var first, last time.Duration
		for _, a := range f.st.answers {
			if a.retried {
				fRetried++
			}
			switch {
			case !a.ok:
				failed++
			case a.inst == lab.CenterID:
				fCenter++
				d := a.at.Sub(start)
				if first == 0 {
					first = d
				}
				last = d
			case a.inst == lab.PrimaryID("wuhu"):
				byCity++
			}
		}
		t.Logf("%s STB: %d answers, %d failed, %d needed their retry, %d by the center (from +%.2fs to +%.2fs), %d by wuhu; drill report: withdrawn +%.1fs, back +%.1fs",
			f.name, len(f.st.answers), failed, fRetried, fCenter, first.Seconds(), last.Seconds(), byCity, withdrawAt, backAt)
		if failed != 0 || fCenter == 0 || byCity == 0 {
			t.Fatalf("%s during the drill: %d failed, %d by the center, %d by the city", f.name, failed, fCenter, byCity)
		}
		// The STBs moved to the center inside the window the report gives (the
		// report polls status every 250 ms; an instance re-registers on every
		// route change).
		if first.Seconds() < withdrawAt-0.75 || last.Seconds() > backAt+0.75 {
			t.Errorf("%s: center answered from +%.1fs to +%.1fs, outside the reported withdrawal +%.1fs..+%.1fs", f.name, first.Seconds(), last.Seconds(), withdrawAt, backAt)
		}
		retried += fRetried
		byCenter += fCenter
		if firstCenter == 0 || first < firstCenter {
			firstCenter = first
		}
		lastCenter = max(lastCenter, last)
	}
	// The report's own account of the takeover, from the center's answers,
	// agrees with the STBs' (both families'): the same requests, the same
	// first and last.
	var answered, withError int
	var from, to float64
	for _, line := range splitLines(out.String()) {
		if i := strings.Index(line, "answered "); strings.HasPrefix(line, "drill done:") && i >= 0 {
			fmt.Sscanf(line[i:], "answered %d requests of wuhu's STBs from +%fs to +%fs, %d of them with an error", &answered, &from, &to, &withError)
		}
	}
	took, gave := reportAt(out.String(), "took the city over"), reportAt(out.String(), "took its traffic back")
	t.Logf("drill report: the center answered %d (%d with an error) from +%.2fs to +%.2fs; took over +%.1fs, gave back +%.1fs", answered, withError, from, to, took, gave)
	// Each STB-side answer by the center is one the center counted; a retry
	// after an error answer would be two.
	if answered < byCenter || answered > byCenter+retried || withError != 0 {
		t.Errorf("the report counts %d center answers (%d with an error), the STBs saw %d (%d retried)", answered, withError, byCenter, retried)
	}
	// Both clocks are this host's, but the report counts from the drill's
	// start, which comes after the test's by schedctl's start-up (tens to
	// hundreds of ms under load): the offset is unknown, the span is not.
	// A printed figure is rounded to 0.1 s.
	if d := (gave - took) - (lastCenter - firstCenter).Seconds(); d < -0.3 || d > 0.3 {
		t.Errorf("report: the center answered from +%.1fs to +%.1fs; the STBs saw it from +%.2fs to +%.2fs", took, gave, firstCenter.Seconds(), lastCenter.Seconds())
	}
	if d := firstCenter.Seconds() - took; d < -0.2 || d > 1.5 {
		t.Errorf("report: took over at +%.1fs of the drill; the STBs first saw the center at +%.2fs of the test", took, firstCenter.Seconds())
	}

	// The IPv6-only city's drill: its STBs move to the center's /48 and back.
	st6 := loopFamily(t, l, 2, 20*time.Millisecond, true)
	st6.waitAnswers(t, lab.PrimaryID("bengbu"), 10, time.Time{}, wait.DefaultTimeout)
	start6 := time.Now()
	var out6 bytesBuf
	if err := runCtl(l, &out6, "drill", "failover", "--region", "bengbu", "--duration", "3s"); err != nil {
		t.Fatalf("drill of bengbu: %v\n%s", err, out6.String())
	}
	st6.waitAnswers(t, lab.PrimaryID("bengbu"), 10, time.Now(), wait.DefaultTimeout)
	st6.stop()
	var first6, last6 time.Duration
	for _, a := range st6.answers {
		if a.ok && a.inst == lab.CenterID {
			if first6 == 0 {
				first6 = a.at.Sub(start6)
			}
			last6 = a.at.Sub(start6)
		}
	}
	t.Logf("bengbu (IPv6 only): the center answered its IPv6 STB from +%.2fs to +%.2fs of the drill; report withdrawn +%.1fs, back +%.1fs",
		first6.Seconds(), last6.Seconds(), reportAt(out6.String(), "withdrew its route"), reportAt(out6.String(), "announces again"))
	st6.check(t, "bengbu's IPv6 STB through its drill")
	if st6.answeredBy(lab.CenterID) == 0 {
		t.Errorf("bengbu's IPv6 STB never reached the center during the drill:\n%s", out6.String())
	}
}

// grepLines keeps the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, line := range splitLines(s) {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestPrivilegedEdgesAndHealth: with the lab's media edges and the checkers
// embedded in the city schedulers, live and VOD go to their own edges, a
// killed edge stops receiving STBs and a restarted one gets them back.
func TestPrivilegedEdgesAndHealth(t *testing.T) {
	for _, tt := range []struct{ server, prefix string }{
		{lab.EdgeLab, "ase"},
		{lab.EdgeNginx, "asg"}, // as operators run edges: stub_status, real HTTP
	} {
		t.Run(tt.server, func(t *testing.T) {
			if _, err := exec.LookPath(tt.server); tt.server == lab.EdgeNginx && err != nil {
				t.Skip("nginx is not installed")
			}
			edgesAndHealth(t, provinceWith(t, tt.prefix, lab.Options{Cities: []string{"hefei"}, Edges: true, EdgeServer: tt.server}))
		})
	}
}

func edgesAndHealth(t *testing.T, l *lab.Lab) {
	answeredBy(t, l, 0, lab.PrimaryID("hefei"), 60*time.Second)
	// Live to the live edges, VOD to the VOD edge, from every STB.
	servicesOnTheirFleets(t, l)
	loc, err := l.Redirect(context.Background(), 0)
	if err != nil || !containsAny(loc, "http://10.1.4.10:8080/", "http://10.1.4.11:8080/") {
		t.Fatalf("redirect %q: %v", loc, err)
	}
	// An STB plays from the edge: the playlist, then a segment it lists.
	playlist, err := exec.Command("ip", "netns", "exec", l.NS("c1"), "curl", "-sf", "--max-time", "2", loc).Output()
	if err != nil || !containsAll(string(playlist), "#EXTM3U", "#EXT-X-MEDIA-SEQUENCE", ".ts") {
		t.Fatalf("playlist from %s: %v\n%s", loc, err, playlist)
	}
	var seg string // the newest segment the live window lists
	for _, line := range strings.Split(string(playlist), "\n") {
		if strings.HasSuffix(line, ".ts") {
			seg = line
		}
	}
	size, err := exec.Command("ip", "netns", "exec", l.NS("c1"), "curl", "-sf", "--max-time", "2", "-o", "/dev/null", "-w", "%{size_download}",
		loc[:strings.LastIndexByte(loc, '/')+1]+seg).Output()
	if err != nil || strings.TrimSpace(string(size)) != strconv.Itoa(edge.SegmentBytes) {
		t.Fatalf("segment from %s: %v, %s bytes", loc, err, size)
	}
	victim := "edge-1-10"
	if containsAll(loc, "10.1.4.11:8080") {
		victim = "edge-1-11"
	}
	p := l.Proc(victim)
	p.Signal(syscall.SIGKILL)
	p.Wait(5 * time.Second)
	victimAddr := victim[len("edge-1-"):] + ":8080"
	d := wait.ForErr(t, "the dead edge out of the answers", 10*time.Second, func() error {
		if loc, _ := l.Redirect(context.Background(), 0); loc == "" || containsAll(loc, victimAddr) {
			return fmt.Errorf("redirected to %q", loc)
		}
		return nil
	})
	t.Logf("dead edge out of the answers after %s", d.Round(time.Millisecond))
	if err := l.Restart(victim); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the restarted edge getting its STBs back", 15*time.Second, func() bool {
		loc, _ := l.Redirect(context.Background(), 0)
		return containsAll(loc, victimAddr)
	})
}

// centerRouted waits until city i's router holds the center's aggregate,
// the route its STBs fall back to: the center's BGP session may come up
// after the cities already answer, and a drill or a stop in that window
// leaves the city's STBs without a route.
func centerRouted(t testing.TB, l *lab.Lab, i int) {
	t.Helper()
	centerRoutedVia(t, l, i, lab.CenterPrefix)
}

// centerRoutedVia waits until city i's router has the center's aggregate p
// (IPv4 or IPv6).
func centerRoutedVia(t testing.TB, l *lab.Lab, i int, p netip.Prefix) {
	t.Helper()
	wait.ForErr(t, fmt.Sprintf("the center's aggregate %s at the city's router", p), 30*time.Second, func() error {
		if out := l.Birdc(fmt.Sprintf("r%d", i+1), "show", "route", p.String()); !strings.Contains(out, p.String()) {
			return fmt.Errorf("\n%s", out)
		}
		return nil
	})
}

// helperArgs are a re-executed test helper's own arguments: those after "--".
func helperArgs() []string {
	args := os.Args
	for i, a := range args {
		if a == "--" {
			return args[i+1:]
		}
	}
	return args
}
