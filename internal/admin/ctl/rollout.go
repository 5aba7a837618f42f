package ctl

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/admin/drillwatch"
	"github.com/anysched/anysched/internal/admin/statusview"
	"github.com/anysched/anysched/internal/province/instance"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/status"
)

// rolloutTimeout bounds a rollout when --timeout is not given: each step
// has its own limit (the flags), and the 60 s default would cut the wait
// for a scheduler being started short.
const rolloutTimeout = time.Hour

// rolloutReport is what a rollout found, for -o json: every step with the
// time it ended, and the centers' answers to the city's STBs before and
// after (summed over the centers; each one's share in Centers).
type rolloutReport struct {
	Region string        `json:"region"`
	Undo   bool          `json:"undo"`
	OK     bool          `json:"ok"`
	Reason string        `json:"reason,omitempty"` // why it stopped, when not ok
	Steps  []rolloutStep `json:"steps"`
	// Revision is the topology revision step 1 read (0 with --undo).
	Revision int64 `json:"revision"`
	// Instances: the city's schedulers ready and announcing (rollout), or
	// withdrawn or gone (--undo).
	Instances []string `json:"instances"`
	// CenterBefore and CenterAfter are the centers' counts of the city's
	// STBs answered, at the start and at the end; CenterAnswered is the
	// difference, CenterFailed those of them answered with an error.
	CenterBefore   uint64           `json:"center_answered_before"`
	CenterAfter    uint64           `json:"center_answered_after"`
	CenterAnswered uint64           `json:"center_answered"`
	CenterFailed   uint64           `json:"center_failed"`
	Centers        map[string]int64 `json:"centers,omitempty"` // answered in the rollout, by center
	// AnnouncedSeconds: when a scheduler of the city was first seen
	// ready and announcing (rollout); WithdrawnSeconds: when none was
	// any more (--undo). LastCenterSeconds: the centers' last answer to
	// the city (rollout), FirstCenterSeconds: their first (--undo). All
	// since the start; absent when it did not happen.
	AnnouncedSeconds   *float64 `json:"announced_seconds,omitempty"`
	WithdrawnSeconds   *float64 `json:"withdrawn_seconds,omitempty"`
	FirstCenterSeconds *float64 `json:"first_center_answer_seconds,omitempty"`
	LastCenterSeconds  *float64 `json:"last_center_answer_seconds,omitempty"`
}

// rolloutStep is one step as it ended.
type rolloutStep struct {
	Name           string  `json:"name"`
	OK             bool    `json:"ok"`
	ElapsedSeconds float64 `json:"elapsed_seconds"` // since the rollout started
	Detail         string  `json:"detail"`
}

// rolloutCmd walks an operator through adding a city to a running
// province, or (--undo) taking it back out, checking each step against the
// center and stopping at the first that fails or times out.
func rolloutCmd(ctx context.Context, e *env, args []string) error {
	city := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		city, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("rollout", flag.ContinueOnError)
	undo := fs.Bool("undo", false, "take the city back out: wait for its schedulers to withdraw (stop them), then check that the center answers its STBs")
	readyTimeout := fs.Duration("ready-timeout", 5*time.Minute, "how long to wait for a scheduler of the city to be registered, ready and announcing (over an established BGP session, if it speaks BGP)")
	localTimeout := fs.Duration("local-timeout", time.Minute, "how long the center may go on answering the city's STBs after its scheduler announces")
	settle := fs.Duration("settle", 3*time.Second, "the center answering none of the city's STBs for this long means the city answers them itself (more than the 2 s between a center's registrations)")
	withdrawTimeout := fs.Duration("withdraw-timeout", 5*time.Minute, "--undo: how long to wait for the city's schedulers to withdraw their route")
	takeoverTimeout := fs.Duration("takeover-timeout", 30*time.Second, "--undo: how long after the withdrawal the center may take to answer a first STB of the city")
	window := fs.Duration("window", 5*time.Second, "--undo: how long the center is watched answering the city's STBs (none may fail)")
	o := outputFlag(fs, formatTable, formatJSON)
	if err := e.parseLeading(fs, args); err != nil {
		return err
	}
	rest := fs.Args()
	if city == "" && len(rest) > 0 { // rollout -o json CITY --undo: flags on both sides
		city = rest[0]
		if err := e.parseLeading(fs, rest[1:]); err != nil {
			return err
		}
		rest = fs.Args()
	}
	switch {
	case len(rest) > 0:
		return usagef("unexpected argument %q", rest[0])
	case city == "":
		return usagef("missing CITY (the region to roll out)")
	case city == topology.CenterName:
		return usagef("center is the province's center, not a city")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ready-timeout", *readyTimeout}, {"local-timeout", *localTimeout}, {"settle", *settle}, {"withdraw-timeout", *withdrawTimeout}, {"takeover-timeout", *takeoverTimeout}, {"window", *window}} {
		if d.v <= 0 {
			return usagef("--%s %s: want a positive duration", d.name, d.v)
		}
	}
	r := &rollout{e: e, city: city, start: e.clock.Now(), out: e.out, rep: rolloutReport{Region: city, Undo: *undo, Steps: []rolloutStep{}, Instances: []string{}}}
	if o.format == formatJSON {
		r.out = e.errOut // the progress; the report is the JSON
	}
	var err error
	if *undo {
		err = r.takeOut(ctx, *withdrawTimeout, *takeoverTimeout, *window)
	} else {
		err = r.bringIn(ctx, *readyTimeout, *localTimeout, *settle)
	}
	r.rep.OK = err == nil
	if err != nil {
		r.rep.Reason = err.Error()
	}
	if o.format == formatJSON {
		if jerr := writeJSON(e.out, r.rep); jerr != nil && err == nil {
			err = jerr
		}
	}
	return err
}

// rollout is one run of the command: the city, when it started, the
// progress lines and the report.
type rollout struct {
	e     *env
	city  string
	start time.Time
	out   io.Writer
	rep   rolloutReport
	steps int // how many steps this direction has
	base  map[string]*pb.RegionTraffic
}

// at is the time since the rollout started.
func (r *rollout) at() time.Duration { return since(r.e.clock, r.start) }

// line prints a progress line with its time.
func (r *rollout) line(format string, args ...any) {
	fmt.Fprintf(r.out, "  +%5.1fs  %s\n", r.at().Seconds(), fmt.Sprintf(format, args...))
}

// done records step n as passed and prints it.
func (r *rollout) done(n int, name, detail string) {
	r.rep.Steps = append(r.rep.Steps, rolloutStep{Name: name, OK: true, ElapsedSeconds: r.at().Seconds(), Detail: detail})
	r.line("%d/%d %s: %s", n, r.steps, name, detail)
}

// failed records step n as failed, prints why and returns the error that
// ends the command.
func (r *rollout) failed(n int, name, why string) error {
	r.rep.Steps = append(r.rep.Steps, rolloutStep{Name: name, OK: false, ElapsedSeconds: r.at().Seconds(), Detail: why})
	fmt.Fprintf(r.out, "  +%5.1fs  %d/%d %s FAILED: %s\n", r.at().Seconds(), n, r.steps, name, why)
	return fmt.Errorf("step %d/%d (%s) failed after %.1fs: %s", n, r.steps, name, r.at().Seconds(), why)
}

// errPollLimit: poll's limit passed before its check was met.
var errPollLimit = errors.New("time is up")

// poll reads Status every pollEvery until check is met, or until limit has
// passed (errPollLimit). A read that fails is tried again at the next
// poll (the center may be busy, etcd electing a leader); only the end of
// ctx ends the poll early. It returns the last status read.
func (r *rollout) poll(ctx context.Context, limit time.Duration, check func(*pb.StatusResponse) bool) (*pb.StatusResponse, error) {
	deadline := r.e.clock.Now().Add(limit)
	var last *pb.StatusResponse
	for {
		st, err := r.e.admin.Status(ctx, &pb.StatusRequest{})
		switch {
		case err == nil:
			last = st
			if check(st) {
				return st, nil
			}
		case ctx.Err() != nil:
			return last, ctx.Err()
		}
		if !r.e.clock.Now().Before(deadline) {
			return last, errPollLimit
		}
		if err := r.e.clock.Sleep(ctx, pollEvery); err != nil {
			return last, err
		}
	}
}

// baseline reads the centers' answers to the city's STBs so far.
func (r *rollout) baseline(ctx context.Context) (*pb.StatusResponse, error) {
	st, err := r.e.admin.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		return nil, err
	}
	r.base = statusview.CenterTraffic(st, r.city)
	r.rep.CenterBefore, r.rep.CenterAfter = sumAnswered(r.base), sumAnswered(r.base)
	return st, nil
}

// bringIn is the rollout: the region in the topology, a scheduler of the
// city ready and announcing, and the center no longer answering the
// city's STBs.
func (r *rollout) bringIn(ctx context.Context, readyTimeout, localTimeout, settle time.Duration) error {
	r.steps = 3
	pre, err := r.baseline(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(r.out, "rollout %s: topology, scheduler, local answers; so far the center answered %d of %s's STBs (%d with an error)\n",
		r.city, r.rep.CenterBefore, r.city, sumFailed(r.base))

	// 1. The region, its nodes and its zones are in the applied topology.
	const topo = "topology"
	resp, err := r.e.admin.GetTopology(ctx, &pb.GetTopologyRequest{})
	if err != nil {
		return r.failed(1, topo, "reading the topology: "+apiError{status.Convert(err)}.Error())
	}
	r.rep.Revision = resp.GetRevision()
	t, err := topology.Decode(resp.GetDocument())
	if err != nil {
		return r.failed(1, topo, fmt.Sprintf("the server sent a document this schedctl cannot read: %v", err))
	}
	detail, why := regionInTopology(t, r.city, resp.GetRevision(), pre)
	if why != "" {
		return r.failed(1, topo, why)
	}
	r.done(1, topo, detail)

	// 2. A scheduler of the city registered, ready and announcing.
	const sched = "scheduler"
	shown := map[string]string{}
	var ready []string
	last, err := r.poll(ctx, readyTimeout, func(st *pb.StatusResponse) bool {
		ready = ready[:0]
		for _, in := range cityInstances(st, r.city) {
			if s := instanceState(in); shown[in.GetId()] != s {
				shown[in.GetId()] = s
				r.line("%s: %s", in.GetId(), s)
			}
			if instance.State(in.GetState()) == instance.Ready && covers(in) && peered(in) {
				ready = append(ready, in.GetId())
			}
		}
		return len(ready) > 0
	})
	if errors.Is(err, errPollLimit) {
		return r.failed(2, sched, fmt.Sprintf("no scheduler of %s was ready and announcing its route within %s: %s", r.city, readyTimeout, notReady(last, r.city)))
	}
	if err != nil {
		return err
	}
	announced := r.at()
	r.rep.AnnouncedSeconds = ptr(announced.Seconds())
	r.rep.Instances = slices.Clone(ready)
	var parts []string
	for _, in := range cityInstances(last, r.city) {
		if slices.Contains(ready, in.GetId()) {
			parts = append(parts, fmt.Sprintf("%s at revision %d: %s", in.GetId(), in.GetSnapshotRevision(), instanceState(in)))
		}
	}
	r.done(2, sched, strings.Join(parts, "; "))

	// 3. The center's answers to the city's STBs stop growing: the
	// routers bring them to the city's scheduler. A change of the count
	// seen at a poll restarts the quiet time.
	const local = "local"
	cur := maps.Clone(r.base)
	lastMove := r.e.clock.Now()
	_, err = r.poll(ctx, localTimeout, func(st *pb.StatusResponse) bool {
		for id, tr := range statusview.CenterTraffic(st, r.city) {
			if tr.GetAnswered() != cur[id].GetAnswered() {
				lastMove = r.e.clock.Now()
			}
			cur[id] = tr
		}
		return r.failedSince(cur) > 0 || since(r.e.clock, lastMove) >= settle
	})
	r.figures(cur)
	if err != nil && !errors.Is(err, errPollLimit) {
		return err
	}
	answered := fmt.Sprintf("%d since the rollout began (%d -> %d)", r.rep.CenterAnswered, r.rep.CenterBefore, r.rep.CenterAfter)
	if r.rep.LastCenterSeconds != nil {
		answered += fmt.Sprintf(", the last at +%.1fs", *r.rep.LastCenterSeconds)
	}
	if n := r.rep.CenterFailed; n > 0 {
		return r.failed(3, local, fmt.Sprintf("the center answered %d of %s's STBs with an error (HTTP 5xx, DNS SERVFAIL: nowhere to send them); it answered %s", n, r.city, answered))
	}
	if errors.Is(err, errPollLimit) {
		return r.failed(3, local, fmt.Sprintf("the center still answers %s's STBs %s after %s announced (%s): do the city's routers prefer its /32? (on the city router: birdc show route %s all)",
			r.city, localTimeout.Round(100*time.Millisecond), list(ready, "and"), answered, cmp.Or(announcedPrefix(last, r.city), "<service address>/32")))
	}
	r.done(3, local, fmt.Sprintf("the center answered none of %s's STBs for %s; %s, none failed", r.city, settle, answered))
	took := fmt.Sprintf("its scheduler was seen announcing at +%.1fs", announced.Seconds())
	if r.rep.LastCenterSeconds != nil {
		took += fmt.Sprintf(", the center's last answer to the city was at +%.1fs", *r.rep.LastCenterSeconds)
	} else {
		took += "; the center answered none of its STBs meanwhile (no traffic from the city reached it)"
	}
	fmt.Fprintf(r.out, "rollout done: %s answers its own STBs; %s\n", r.city, took)
	return nil
}

// takeOut is --undo: the city's schedulers withdraw (the operator stops
// them), and the center answers the city's STBs, none with an error.
func (r *rollout) takeOut(ctx context.Context, withdrawTimeout, takeoverTimeout, window time.Duration) error {
	r.steps = 2
	pre, err := r.baseline(ctx)
	if err != nil {
		return err
	}
	const withdrawn = "withdrawn"
	// Without a center announcing the province's prefix the city's STBs
	// would reach no scheduler once its own withdraw.
	var centers []string
	for _, in := range pre.GetInstances() {
		if instance.Role(in.GetRole()) == instance.Central && covers(in) {
			centers = append(centers, in.GetId())
		}
	}
	if len(centers) == 0 {
		return r.failed(1, withdrawn, fmt.Sprintf("no center announces the province's prefix: without %s's schedulers its STBs would reach no scheduler; stop nothing", r.city))
	}
	fmt.Fprintf(r.out, "rollout --undo %s: stop %s's schedulers now (systemctl stop anysched-regional on each of its hosts); waiting up to %s for their routes to go; the center (%s) takes its STBs over\n",
		r.city, r.city, withdrawTimeout, strings.Join(centers, ", "))

	// 1. No scheduler of the city announces any more (withdrawn, or its
	// record gone with the process).
	shown := map[string]string{}
	for _, in := range cityInstances(pre, r.city) {
		shown[in.GetId()] = instanceState(in)
	}
	var still []string
	_, err = r.poll(ctx, withdrawTimeout, func(st *pb.StatusResponse) bool {
		still = still[:0]
		present := map[string]bool{}
		for _, in := range cityInstances(st, r.city) {
			present[in.GetId()] = true
			if s := instanceState(in); shown[in.GetId()] != s {
				shown[in.GetId()] = s
				r.line("%s: %s", in.GetId(), s)
			}
			if covers(in) {
				still = append(still, in.GetId())
			}
		}
		for _, id := range slices.Sorted(maps.Keys(shown)) {
			if !present[id] && shown[id] != gone {
				shown[id] = gone
				r.line("%s: %s", id, gone)
			}
		}
		return len(still) == 0
	})
	if errors.Is(err, errPollLimit) {
		return r.failed(1, withdrawn, fmt.Sprintf("%s still announce(s) the route after %s: stop it (systemctl stop anysched-regional)", list(still, "and"), withdrawTimeout))
	}
	if err != nil {
		return err
	}
	r.rep.WithdrawnSeconds = ptr(r.at().Seconds())
	r.rep.Instances = slices.Sorted(maps.Keys(shown))
	var parts []string
	for _, id := range r.rep.Instances {
		parts = append(parts, id+" "+shown[id])
	}
	if len(parts) == 0 {
		parts = []string{"none registered"}
	}
	r.done(1, withdrawn, fmt.Sprintf("no scheduler of %s announces its route (%s)", r.city, strings.Join(parts, "; ")))

	// 2. The center takes the city's STBs over (what a drill follows),
	// and answers them for the window, none with an error.
	const center = "center"
	follow := drillwatch.NewCenters(r.city, r.start, r.base)
	observe := func(st *pb.StatusResponse) { printEvents(r.out, r.start, follow.Observe(st, r.e.clock.Now())) }
	_, err = r.poll(ctx, takeoverTimeout, func(st *pb.StatusResponse) bool {
		observe(st)
		return len(follow.Answering()) > 0
	})
	if errors.Is(err, errPollLimit) {
		return r.failed(2, center, fmt.Sprintf("no center answered any of %s's STBs within %s of the withdrawal: is there STB traffic from the city (the takeover shows only through it)? does the city router hold the center's prefix?", r.city, takeoverTimeout))
	}
	if err != nil {
		return err
	}
	_, err = r.poll(ctx, window, func(st *pb.StatusResponse) bool {
		observe(st)
		return false
	})
	if err != nil && !errors.Is(err, errPollLimit) {
		return err
	}
	cur := maps.Clone(r.base)
	maps.Copy(cur, follow.Answering())
	r.figures(cur)
	r.rep.FirstCenterSeconds = ptr(follow.TookOver().Sub(r.start).Seconds())
	answered := fmt.Sprintf("%d since the rollout began (%d -> %d), the first at +%.1fs", r.rep.CenterAnswered, r.rep.CenterBefore, r.rep.CenterAfter, *r.rep.FirstCenterSeconds)
	if n := r.rep.CenterFailed; n > 0 {
		return r.failed(2, center, fmt.Sprintf("the center answered %d of %s's STBs with an error (HTTP 5xx, DNS SERVFAIL); it answered %s", n, r.city, answered))
	}
	r.done(2, center, fmt.Sprintf("%s answers %s's STBs: %s, none failed in the %s watched", whoAnswered(r.rep.Centers), r.city, answered, window))
	fmt.Fprintf(r.out, "rollout undone: the center answers %s's STBs; %s stays in the topology (the center still sends its STBs to its servers): remove it with schedctl apply to take it out entirely\n", r.city, r.city)
	return nil
}

// gone is how an instance whose record vanished is shown: its process
// stopped (the record goes with it, or with its lease 10 s after a crash).
const gone = "gone (its record with it: stopped)"

// figures fills the report's center counts from the centers' current
// counts cur (by center), against the baseline.
func (r *rollout) figures(cur map[string]*pb.RegionTraffic) {
	r.rep.CenterAfter = sumAnswered(cur)
	r.rep.CenterAnswered, r.rep.CenterFailed = 0, r.failedSince(cur)
	r.rep.Centers = map[string]int64{}
	var last time.Time
	for id, t := range cur {
		n := grown(t.GetAnswered(), r.base[id].GetAnswered())
		if n == 0 {
			continue
		}
		r.rep.CenterAnswered += n
		r.rep.Centers[id] = int64(n)
		if l := t.GetLast().AsTime(); l.After(last) {
			last = l
		}
	}
	if !last.IsZero() {
		r.rep.LastCenterSeconds = ptr(last.Sub(r.start).Seconds())
	}
}

// failedSince is how many of the city's STBs the centers answered with an
// error since the baseline.
func (r *rollout) failedSince(cur map[string]*pb.RegionTraffic) uint64 {
	var n uint64
	for id, t := range cur {
		n += grown(t.GetFailed(), r.base[id].GetFailed())
	}
	return n
}

// grown is how much a center's count grew from base to now; a count below
// its base is a center that restarted meanwhile, whose whole count is new.
func grown(now, base uint64) uint64 {
	if now < base {
		return now
	}
	return now - base
}

// regionInTopology checks that region is in t with nodes, servers and
// coverage zones, and describes it ("" and why not, if it is not).
func regionInTopology(t *topology.Topology, region string, rev int64, st *pb.StatusResponse) (detail, why string) {
	if !slices.ContainsFunc(t.Regions, func(r topology.Region) bool { return r.Name == region }) {
		names := make([]string, len(t.Regions))
		for i, r := range t.Regions {
			names[i] = r.Name
		}
		return "", fmt.Sprintf("%s is not a region of topology revision %d (regions: %s): add the region, its nodes and its coverage zones, then schedctl apply", region, rev, strings.Join(names, ", "))
	}
	var nodes, servers, zones, networks int
	for _, n := range t.Nodes {
		if n.Region == region {
			nodes++
			servers += len(n.Servers)
		}
	}
	for _, z := range t.Zones {
		if z.Region == region {
			zones++
			networks += len(z.Networks)
		}
	}
	switch {
	case servers == 0:
		return "", fmt.Sprintf("%s has no servers in topology revision %d (%d nodes): add its nodes and servers, then schedctl apply", region, rev, nodes)
	case networks == 0:
		return "", fmt.Sprintf("%s has no coverage zones in topology revision %d: no STB is placed in it, so nothing would reach its scheduler as its own; add its zones, then schedctl apply", region, rev)
	}
	avail := ""
	for _, h := range st.GetRegions() {
		if h.GetRegion() == region {
			avail = fmt.Sprintf(" (%d available)", h.GetAvailable())
		}
	}
	return fmt.Sprintf("%s is in revision %d: %s, %s%s, %s (%s)", region, rev,
		plural(nodes, "nodes"), plural(servers, "servers"), avail, plural(zones, "zones"), plural(networks, "networks")), ""
}

// cityInstances are the regional schedulers of region in st.
func cityInstances(st *pb.StatusResponse, region string) []*pb.Instance {
	var out []*pb.Instance
	for _, in := range st.GetInstances() {
		if instance.Role(in.GetRole()) == instance.Regional && in.GetRegion() == region {
			out = append(out, in)
		}
	}
	return out
}

// covers reports whether in takes the STBs routing brings to it: its
// route is announced, or it announces nothing itself and is ready (as
// store.Instance.Covers).
func covers(in *pb.Instance) bool {
	return in.GetAnnounced() || (in.GetAnnounceReason() == store.NotAnnouncedModeNone && instance.State(in.GetState()) == instance.Ready)
}

// instanceState is an instance's state, route and BGP sessions, as a
// progress line shows it when it changes: "ready, announces
// 198.18.0.1/32, BGP 10.2.2.1 established".
func instanceState(in *pb.Instance) string {
	s := cmp.Or(in.GetState(), "registered") + ", " + routeText(in)
	if ps := in.GetBgpPeers(); len(ps) > 0 {
		parts := make([]string, len(ps))
		for i, p := range ps {
			parts[i] = p.GetAddress() + " " + p.GetState()
		}
		s += ", BGP " + strings.Join(parts, ", ")
	}
	return s
}

// peered reports whether an instance that announces over BGP has a
// session established, so that its route reaches a router; one with no
// BGP peers (OSPF, or routed by other means) passes.
func peered(in *pb.Instance) bool {
	ps := in.GetBgpPeers()
	return len(ps) == 0 || slices.ContainsFunc(ps, func(p *pb.BGPPeer) bool { return p.GetState() == "established" })
}

// routeText is an instance's route: "announces P", "withdrawn (why)", or
// that it announces nothing itself.
func routeText(in *pb.Instance) string {
	switch {
	case in.GetAnnounced():
		return "announces " + cmp.Or(in.GetAnnounces(), "its route")
	case in.GetAnnounceReason() == store.NotAnnouncedModeNone:
		return "announces nothing itself (" + store.NotAnnouncedModeNone + ")"
	}
	return "not announced (" + cmp.Or(in.GetAnnounceReason(), "no reason given") + ")"
}

// notReady says why no scheduler of region is ready and announcing, from
// the last status read.
func notReady(st *pb.StatusResponse, region string) string {
	if st == nil {
		return "the center's status could not be read"
	}
	ins := cityInstances(st, region)
	if len(ins) == 0 {
		return "none registered: start it (systemctl enable --now anysched-regional) and read its log"
	}
	parts := make([]string, len(ins))
	for i, in := range ins {
		parts[i] = in.GetId() + " " + instanceState(in)
	}
	return strings.Join(parts, "; ")
}

// announcedPrefix is the prefix a scheduler of region announces ("" if
// none says).
func announcedPrefix(st *pb.StatusResponse, region string) string {
	for _, in := range cityInstances(st, region) {
		if p := in.GetAnnounces(); p != "" {
			return p
		}
	}
	return ""
}

// whoAnswered names the centers that answered: "the center (center-1)",
// or "the centers (center-1 40, center-2 12)".
func whoAnswered(by map[string]int64) string {
	ids := slices.Sorted(maps.Keys(by))
	switch len(ids) {
	case 0:
		return "the center"
	case 1:
		return "the center (" + ids[0] + ")"
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%s %d", id, by[id])
	}
	return "the centers (" + strings.Join(parts, ", ") + ")"
}

func sumAnswered(by map[string]*pb.RegionTraffic) uint64 {
	var n uint64
	for _, t := range by {
		n += t.GetAnswered()
	}
	return n
}

func sumFailed(by map[string]*pb.RegionTraffic) uint64 {
	var n uint64
	for _, t := range by {
		n += t.GetFailed()
	}
	return n
}

func ptr[T any](v T) *T { return &v }
