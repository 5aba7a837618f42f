package lab_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/stb/token"
	"github.com/anysched/anysched/internal/testbed/chaos"
	"github.com/anysched/anysched/internal/testbed/lab"
	"github.com/anysched/anysched/internal/testbed/stbload"
	"github.com/anysched/anysched/internal/testbed/wait"
)

// TestPrivilegedRollingUpgrade: the province starts on the previous
// release's schedulers (deploy/releases, built from its commit), then is
// upgraded to this tree's under STB load in the documented order (the
// center, then city by city, a city's standby before its primary), and
// rolled back the other way round (cities first, standby first, the
// center last). After each restart every scheduler is ready and runs the
// release it should; no STB request fails; and a city's plan survives its
// primary's restart: the stand-in (the standby, or the center for a city
// without one) plans from the plan the primary published, and the
// restarted primary from the stand-in's (or either from the center's, if
// it stood in for a moment).
func TestPrivilegedRollingUpgrade(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	top, tag, commit := previousRelease(t)
	began := time.Now()
	oldBin := buildRelease(t, top, tag, commit)
	t.Logf("built %s (%s) in %.1fs", tag, commit[:12], time.Since(began).Seconds())

	cities := []string{"hefei", "wuhu"}
	began = time.Now()
	// Sessions live 30 s without a request (the lab's 4 s is shorter than
	// the 10 s steps a published plan keeps their last request in, and
	// would drop most of them from a handed-over plan).
	l := provinceWith(t, "up", lab.Options{Cities: cities, Standby: map[int]bool{0: true}, Edges: true, QoE: true, SessionTTL: 30 * time.Second, SchedulerBin: oldBin})
	t.Cleanup(func() { // before provinceWith's clean-up, which shows the others
		if t.Failed() {
			for _, n := range []string{lab.StandbyID("hefei"), lab.PrimaryID("wuhu")} {
				t.Logf("--- %s log (tail):\n%s", n, tail(l.Log(n), 3000))
			}
		}
	})
	for i, c := range cities {
		answeredBy(t, l, i, lab.PrimaryID(c), 60*time.Second)
	}
	t.Logf("province up on %s in %.1fs", tag, time.Since(began).Seconds())
	newBin := l.Bin()
	// The upgrade's order: the center, then city by city, standby first.
	all := []string{lab.CenterID, lab.StandbyID("hefei"), lab.PrimaryID("hefei"), lab.PrimaryID("wuhu")}
	want := map[string]string{}
	for _, n := range all {
		want[n] = tag
	}
	readyOn(t, l, want)

	// STB load from both cities until the end: viewers with tokens, as
	// the QoE drill's.
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	loadDone := viewerLoad(ctx, t, l, chaos.LoadOptions{
		Cities: cities, Viewers: lab.QoEViewers, Steady: 2, Pause: 150 * time.Millisecond, Duration: 5 * time.Minute, Channels: 20, Seed: 1,
		MaxRequests: 100_000,
	})
	// Both cities plan their viewers on the old release before anything
	// restarts.
	for _, c := range cities {
		planning(t, l, lab.PrimaryID(c))
	}

	loadStart := time.Now()
	step := func(name, dir, release string) {
		t.Helper()
		began := time.Now()
		stand := "" // who plans the city while name is down
		if name == lab.PrimaryID("hefei") {
			stand = lab.StandbyID("hefei")
		} else if name == lab.PrimaryID("wuhu") {
			stand = lab.CenterID
		}
		standFrom, ownFrom := len(l.Log(stand)), len(l.Log(name))
		p := l.Proc(name)
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !p.Wait(15 * time.Second) {
			t.Fatalf("%s did not stop within 15s", name)
		}
		handed := ""
		if stand != "" {
			handed = fmt.Sprintf("; %s planned from %s", stand, adopted(t, l, stand, standFrom, name))
		}
		if err := l.RestartWith(name, dir); err != nil {
			t.Fatal(err)
		}
		want[name] = release
		readyOn(t, l, want)
		if stand != "" {
			handed += fmt.Sprintf(", %s from %s", name, adopted(t, l, name, ownFrom, stand))
		}
		for _, c := range cities {
			planning(t, l, lab.PrimaryID(c))
		}
		t.Logf("+%4.1fs %s on %s in %.1fs: every scheduler ready%s", time.Since(loadStart).Seconds(), name, release, time.Since(began).Seconds(), handed)
	}
	// This tree's version as its binaries report it: "devel", or a version
	// the toolchain derives from the tags (v0.9.1-0.<date>-<commit> after
	// v0.9.0), whichever the build gives; the steps compare it exactly.
	out, err := exec.Command(filepath.Join(newBin, "schedctl"), "version").Output()
	if err != nil {
		t.Fatalf("schedctl version: %v", err)
	}
	current := strings.TrimPrefix(strings.TrimSpace(string(out)), "schedctl ")
	if current == tag || current == "" {
		t.Fatalf("this tree reports version %q, which does not tell it from the previous release %s", current, tag)
	}
	for _, n := range all {
		step(n, newBin, current)
	}
	// Roll back: city by city, standby first, the center last.
	for _, n := range []string{lab.StandbyID("hefei"), lab.PrimaryID("hefei"), lab.PrimaryID("wuhu"), lab.CenterID} {
		step(n, oldBin, tag)
	}
	stopLoad()
	reqs := loadDone()

	perCity := map[int][3]int{} // requests, failed, needed the STB's retry
	var failed []string
	for _, r := range reqs {
		c := perCity[r.City]
		c[0]++
		if r.Tries > 1 {
			c[2]++
		}
		if !r.OK() {
			c[1]++
			if len(failed) < 10 {
				failed = append(failed, fmt.Sprintf("%s %s: %s (first try: %s)", cities[r.City], r.Start.Format("15:04:05.000"), r.Err, r.FirstErr))
			}
		}
		perCity[r.City] = c
	}
	for i, c := range cities {
		t.Logf("%s: %d STB requests, %d failed, %d needed the STB's retry", c, perCity[i][0], perCity[i][1], perCity[i][2])
		if perCity[i][0] == 0 || perCity[i][1] != 0 {
			t.Errorf("%s: %d of %d STB requests failed: %v", c, perCity[i][1], perCity[i][0], failed)
		}
	}
	t.Logf("upgrade and rollback under load: %.1fs", time.Since(loadStart).Seconds())
}

// viewerLoad runs o's STB load from the lab's client namespaces to the
// Anycast address, each viewer with its token signed by the lab's key,
// until ctx ends or o's bounds; the function returned waits for its end
// and returns every request.
func viewerLoad(ctx context.Context, t *testing.T, l *lab.Lab, o chaos.LoadOptions) func() []chaos.Request {
	t.Helper()
	path, err := l.TokenKey()
	if err != nil {
		t.Fatal(err)
	}
	secret, err := token.ReadSecret(path)
	if err != nil {
		t.Fatal(err)
	}
	o.Dial = func(i int) func(context.Context, string, string) (net.Conn, error) {
		return l.DialIn(fmt.Sprintf("c%d", i+1))
	}
	o.Target, o.Host = lab.ServiceIP.String()+":80", topogen.Hostname
	o.Token = stbload.Tokens(token.Key{ID: lab.TokenKeyID, Secret: secret}, time.Hour, 1)
	var reqs []chaos.Request
	done := make(chan struct{})
	go func() {
		defer close(done)
		reqs = chaos.RunLoad(ctx, o)
	}()
	return func() []chaos.Request { <-done; return reqs }
}

// previousRelease is the last release deploy/releases lists: its tag and
// commit, and the checkout's top directory. Outside a git checkout (a source tarball) the test skips: there
// is no history to build the release from.
func previousRelease(t *testing.T) (top, tag, commit string) {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skip("not a git checkout (a source tarball?): the previous release cannot be built from its commit")
	}
	top = strings.TrimSpace(string(out))
	f, err := os.Open(filepath.Join(top, "deploy", "releases"))
	if err != nil {
		t.Fatalf("the releases to upgrade from: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) == 2 && !strings.HasPrefix(fs[0], "#") {
			tag, commit = fs[0], fs[1]
		}
	}
	if err := sc.Err(); err != nil || commit == "" {
		t.Fatalf("deploy/releases names no release (tag and commit): %v", err)
	}
	if len(commit) != 40 {
		t.Fatalf("deploy/releases: %s's commit %q is not a full hash", tag, commit)
	}
	if out, err := exec.Command("git", "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		t.Fatalf("the previous release %s (commit %s) is not in this clone (a shallow one?): fetch it (git fetch --unshallow, or git fetch origin tag %s): %v %s", tag, commit, tag, err, out)
	}
	return top, tag, commit
}

// buildRelease builds the schedulers of commit (the only binaries of it
// the test runs), with the version stamped as tag. Its tree is extracted
// once into a directory named by the commit, under the temporary
// directory, and left there for the next run (about 10 MB): the build
// cache keys the module's packages by their directory, so the same one
// each run reuses them, and the dependencies are shared with this tree's
// build.
func buildRelease(t *testing.T, top, tag, commit string) string {
	t.Helper()
	src := filepath.Join(os.TempDir(), "anysched-release-"+commit)
	if _, err := os.Stat(filepath.Join(src, "go.mod")); err != nil {
		extractRelease(t, top, tag, commit, src)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-ldflags", "-X github.com/anysched/anysched/internal/wiring/version.stamped="+tag,
		"-o", bin+"/", "./central-scheduler", "./regional-scheduler")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s (%s): %v\n%s", tag, commit, err, out)
	}
	return bin
}

// extractRelease writes commit's tree to src: into a directory beside it,
// renamed into place whole (a concurrent run's rename first is as good).
func extractRelease(t *testing.T, top, tag, commit, src string) {
	t.Helper()
	tmp, err := os.MkdirTemp(filepath.Dir(src), filepath.Base(src)+".")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	archive := exec.Command("git", "archive", "--format=tar", commit)
	archive.Dir = top // in a subdirectory, git archive takes only that
	extract := exec.Command("tar", "-x", "-C", tmp)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	extract.Stdin = pipe
	var archiveErr, extractErr strings.Builder
	archive.Stderr, extract.Stderr = &archiveErr, &extractErr
	if err := extract.Start(); err != nil {
		t.Fatalf("extract %s: %v", tag, err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v %s", tag, err, archiveErr.String())
	}
	if err := extract.Wait(); err != nil {
		t.Fatalf("extract %s: %v %s", tag, err, extractErr.String())
	}
	if err := os.Rename(tmp, src); err != nil {
		if _, statErr := os.Stat(filepath.Join(src, "go.mod")); statErr != nil {
			t.Fatalf("extract %s into %s: %v", tag, src, err)
		}
	}
}

// upInstance is what the upgrade test reads of an instance in schedctl
// status -o json.
type upInstance struct {
	ID        string `json:"id"`
	Region    string `json:"region"`
	State     string `json:"state"`
	Version   string `json:"version"`
	Announced bool   `json:"announced"`
	BGPPeers  []struct {
		Address string `json:"address"`
		State   string `json:"state"`
	} `json:"bgp_peers"`
	QoE *struct {
		Sessions int64 `json:"sessions,string"`
		Idle     bool  `json:"idle"`
		Peers    int   `json:"peers"`
		SafeMode bool  `json:"safe_mode"`
	} `json:"qoe"`
}

// upStatus is schedctl status -o json's instances, by id.
func upStatus(l *lab.Lab) (map[string]upInstance, error) {
	var out bytesBuf
	if err := runCtl(l, &out, "status", "-o", "json"); err != nil {
		return nil, fmt.Errorf("status: %v %s", err, out.String())
	}
	var st struct {
		Instances []upInstance `json:"instances"`
	}
	if err := json.Unmarshal([]byte(out.String()), &st); err != nil {
		return nil, fmt.Errorf("status -o json: %v", err)
	}
	m := map[string]upInstance{}
	for _, in := range st.Instances {
		m[in.ID] = in
	}
	return m, nil
}

// readyOn waits until every scheduler of want is ready, announced with
// its BGP peers established (the checks of docs/operations.md's upgrade
// steps: a standby whose route the router does not have yet would leave
// its primary's STBs to the center), and reports exactly the version want
// names for it (the tag, or what this tree's binaries report); a city's
// planners have each read the others' claims (a standby that has not
// would take its primary's STBs without the plan it published).
func readyOn(t *testing.T, l *lab.Lab, want map[string]string) {
	t.Helper()
	wait.ForErr(t, "every scheduler ready on its release", 60*time.Second, func() error {
		st, err := upStatus(l)
		if err != nil {
			return err
		}
		peers := map[string]int{} // by region: its schedulers in want
		for id := range want {
			peers[st[id].Region]++
		}
		for id, rel := range want {
			in, ok := st[id]
			switch {
			case !ok:
				return fmt.Errorf("%s not registered", id)
			case in.State != "ready":
				return fmt.Errorf("%s is %s", id, in.State)
			case !in.Announced:
				return fmt.Errorf("%s does not announce", id)
			case in.Version != rel:
				return fmt.Errorf("%s runs %s, want %s", id, in.Version, rel)
			}
			if in.Region != "center" && peers[in.Region] > 1 && (in.QoE == nil || in.QoE.Peers < peers[in.Region]-1) {
				return fmt.Errorf("%s's planner has not read its city's other planners' claims yet", id)
			}
			for _, p := range in.BGPPeers {
				if p.State != "established" {
					return fmt.Errorf("%s's BGP peer %s is %s", id, p.Address, p.State)
				}
			}
		}
		return nil
	})
}

// planning waits until inst plans sessions of its city (not idle, not
// in safe mode).
func planning(t *testing.T, l *lab.Lab, inst string) {
	t.Helper()
	wait.ForErr(t, inst+" planning its city's viewers", 30*time.Second, func() error {
		st, err := upStatus(l)
		if err != nil {
			return err
		}
		q := st[inst].QoE
		if q == nil || q.Idle || q.SafeMode || q.Sessions == 0 {
			return fmt.Errorf("%s's plan: %+v", inst, q)
		}
		return nil
	})
}

var adoptLine = regexp.MustCompile(`msg="planning from the region's last published plan" .*?\bfrom=(\S+) .*?\bsessions=(\d+) of=(\d+)`)

// adopted waits until inst's log, after its first `from` bytes, says it
// planned from the plan of prev, with sessions in it: the plan handed over
// rather than started cold. The center's plan will do too: it stands in
// for a city whose STBs reach neither of its schedulers for a moment (the
// routers between a withdrawal and the other's route), planning from the
// plan before, and the next planner then takes the freshest, its. It
// returns whose plan and how many of its sessions.
func adopted(t *testing.T, l *lab.Lab, inst string, from int, prev string) string {
	t.Helper()
	var took string
	wait.ForErr(t, fmt.Sprintf("%s planning from %s's plan", inst, prev), 30*time.Second, func() error {
		log := l.Log(inst)
		if len(log) < from {
			from = 0
		}
		var seen []string
		for _, m := range adoptLine.FindAllStringSubmatch(log[from:], -1) {
			n, _ := strconv.Atoi(m[2])
			if m[1] == prev && n > 0 {
				took = fmt.Sprintf("%s's plan (%s of %s sessions)", m[1], m[2], m[3])
				return nil
			}
			seen = append(seen, m[0])
		}
		return fmt.Errorf("no such line yet; seen %q", seen)
	})
	return took
}
