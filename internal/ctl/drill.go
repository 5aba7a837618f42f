package ctl

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/anysched/anysched/internal/statusview"
	"github.com/anysched/anysched/internal/store"
	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// pollEvery is how often a drill reads the province's state.
const pollEvery = 250 * time.Millisecond

// drillCmd runs a drill: failover (a region's schedulers withdraw their
// route for a while) or etcd-loss (the lab's etcd stops for a while).
func drillCmd(ctx context.Context, e *env, args []string) error {
	if e.help && (len(args) == 0 || !slices.Contains([]string{"failover", "etcd-loss"}, args[0])) {
		return e.helpEach(ctx, drillCmd, "failover", "etcd-loss")
	}
	if len(args) > 0 {
		switch args[0] {
		case "failover":
			return failoverCmd(ctx, e, args[1:])
		case "etcd-loss":
			return etcdLossCmd(ctx, e, args[1:])
		}
	}
	return usagef("drill failover --region R --duration D, or drill etcd-loss --duration D [--members N] [--leader]")
}

// failoverCmd starts a failover drill and, unless --no-watch, follows it:
// when each of the region's schedulers withdrew and announced again, when
// the centers took the city's STBs over and gave them back, and who planned
// the city's viewers with what QoE, before, during and after.
func failoverCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("drill failover", flag.ContinueOnError)
	region := fs.String("region", "", "the region whose schedulers withdraw (\"center\" for the center)")
	dur := fs.Duration("duration", 30*time.Second, "how long the route stays withdrawn")
	prod := fs.Bool("i-know-this-is-production", false, "run the drill on a province that is not a lab")
	noWatch := fs.Bool("no-watch", false, "start the drill and return")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if err := need("--region", *region); err != nil {
		return err
	}
	var base map[string]*pb.RegionTraffic // the centers' answers to the city's STBs so far
	pre, err := e.admin.Status(ctx, &pb.StatusRequest{})
	if err == nil {
		base = statusview.CenterTraffic(pre, *region)
	}
	start := e.clock.Now()
	resp, err := e.admin.Drill(ctx, &pb.DrillRequest{Region: *region, DurationSeconds: dur.Seconds(), ProductionConfirmed: *prod})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "drill: %s's schedulers %v withdraw their route until %s\n", *region, resp.GetInstances(), resp.GetUntil().AsTime().Local().Format(time.TimeOnly))
	if *noWatch || len(resp.GetInstances()) == 0 {
		return nil
	}
	// Follow the instances' route state until every one of them announces
	// again, and the centers' answers to the city's STBs until they stop.
	// An instance that did not announce before the drill is not waited for:
	// nothing says it will announce after it.
	rs := &routes{start: start, out: e.out, withdrawn: map[string]time.Duration{}, back: map[string]time.Duration{}}
	for _, id := range resp.GetInstances() {
		if why, ok := notAnnouncing(pre, id); ok {
			fmt.Fprintf(e.out, "  %s did not announce a route before the drill (%s): not waited for\n", id, why)
			continue
		}
		rs.ids = append(rs.ids, id)
	}
	if len(rs.ids) == 0 {
		fmt.Fprintf(e.out, "drill: none of %s's schedulers announced a route: there is nothing to follow\n", *region)
		return nil
	}
	follow := &takeover{region: *region, start: start, base: base, out: e.out, clock: e.clock}
	// The QoE of the city's viewers: who plans them, before, during and
	// after (a center drill has no city's viewers to follow).
	var qoe *statusview.QoEWatch
	if *region != "center" {
		qoe = statusview.NewQoEWatch(*region)
		if pre != nil {
			qoe.Observe(pre, start)
		}
	}
	awaitingQoE := func() bool { return qoe != nil && qoe.Awaiting(e.clock.Now()) }
	deadline := resp.GetUntil().AsTime().Add(60 * time.Second)
	var allBack time.Time
	for e.clock.Now().Before(deadline) && (!rs.allBack() || !follow.settled(allBack) || awaitingQoE()) {
		if st, err := e.admin.Status(ctx, &pb.StatusRequest{}); err == nil {
			now := e.clock.Now()
			if *region != "center" {
				follow.observe(st)
			}
			rs.observe(st, now)
			if len(rs.ids) == 0 {
				break // each announces nothing itself: there is nothing to follow
			}
			if allBack.IsZero() && rs.allBack() {
				allBack = now
			}
			if qoe != nil {
				observeQoE(e.out, qoe, rs, allBack, st, now)
			}
		}
		if err := e.clock.Sleep(ctx, pollEvery); err != nil {
			return err
		}
	}
	if !rs.allBack() {
		if qoe != nil {
			_ = writeDrillQoE(e.out, *region, qoe)
		}
		return fmt.Errorf("not every instance announced again within 60 s of the drill's end: %s did not", list(rs.notBack(), "and"))
	}
	if len(rs.ids) == 0 {
		return nil // every instance turned out to announce nothing itself (said above)
	}
	if *region == "center" {
		fmt.Fprintf(e.out, "drill done: the center announces again (status is polled every 250 ms; STB-side figures: the load generator)\n")
		return nil
	}
	follow.summary()
	return writeDrillQoE(e.out, *region, qoe)
}

// observeQoE hands a sample to the QoE watch, after the withdrawal and the
// return it shows, and prints a change of the viewers' planners.
func observeQoE(out io.Writer, q *statusview.QoEWatch, rs *routes, allBack time.Time, st *pb.StatusResponse, now time.Time) {
	if len(rs.withdrawn) > 0 {
		q.Withdrawn(rs.start.Add(slices.Min(slices.Collect(maps.Values(rs.withdrawn)))))
	}
	if !allBack.IsZero() {
		q.Back(allBack)
	}
	if line := q.Observe(st, now); line != "" {
		fmt.Fprintf(out, "  +%5.1fs  %s\n", now.Sub(rs.start).Seconds(), line)
	}
}

// routes follows the route state of a drill's instances: when each
// withdrew its route, and when it announced again, since start.
type routes struct {
	ids             []string
	start           time.Time
	out             io.Writer
	withdrawn, back map[string]time.Duration
}

func (r *routes) observe(st *pb.StatusResponse, now time.Time) {
	for _, in := range st.GetInstances() {
		id := in.GetId()
		if !slices.Contains(r.ids, id) || in.GetUpdatedAt().AsTime().Before(r.start) {
			continue // not in the drill, or a record from before it started
		}
		if in.GetAnnounceReason() == store.NotAnnouncedModeNone {
			// Without a status from before the drill this is the first
			// sight of it: it will never announce.
			r.ids = slices.DeleteFunc(r.ids, func(s string) bool { return s == id })
			fmt.Fprintf(r.out, "  %s announces nothing itself (%s): not waited for\n", id, store.NotAnnouncedModeNone)
			continue
		}
		_, out := r.withdrawn[id]
		if !out && !in.GetAnnounced() {
			r.withdrawn[id] = now.Sub(r.start)
			fmt.Fprintf(r.out, "  +%5.1fs  %s withdrew its route (%s)\n", r.withdrawn[id].Seconds(), id, in.GetAnnounceReason())
			continue
		}
		if _, back := r.back[id]; out && !back && in.GetAnnounced() {
			r.back[id] = now.Sub(r.start)
			fmt.Fprintf(r.out, "  +%5.1fs  %s announces again\n", r.back[id].Seconds(), id)
		}
	}
}

// notAnnouncing reports whether the status taken before the drill shows
// instance id not announcing its route, and why.
func notAnnouncing(pre *pb.StatusResponse, id string) (why string, ok bool) {
	for _, in := range pre.GetInstances() {
		if in.GetId() == id && !in.GetAnnounced() {
			return cmp.Or(in.GetAnnounceReason(), "no reason given"), true
		}
	}
	return "", false
}

func (r *routes) allBack() bool { return len(r.notBack()) == 0 }

func (r *routes) notBack() []string {
	var ids []string
	for _, id := range r.ids {
		if _, ok := r.back[id]; !ok {
			ids = append(ids, id)
		}
	}
	return ids
}
