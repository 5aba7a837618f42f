package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/admin/drillwatch"
	"github.com/anysched/anysched/internal/province/opstate"
	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// pollEvery is how often a drill (or a rollout) reads the province's state.
const pollEvery = drillwatch.Poll

// drillCmd runs a drill: failover (a region's schedulers withdraw their
// route for a while) or etcd-loss (the lab's etcd stops for a while).
func drillCmd(ctx context.Context, e *env, args []string) error {
	return e.dispatch(ctx, args, []subcommand{{"failover", failoverCmd}, {"etcd-loss", etcdLossCmd}}, nil,
		"drill failover --region R --duration D, or drill etcd-loss --duration D [--members N] [--leader]")
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
	target, _ := opstate.ParseDrillTarget(*region) // not empty: checked above
	pre, err := e.admin.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		pre = nil // unknown: every instance is waited for
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
	// again, the centers' answers to the city's STBs until they stop, and
	// the QoE of the city's viewers: who plans them, before, during and
	// after (a center drill has no city's viewers to follow).
	w, notes := drillwatch.New(target, start, resp.GetUntil().AsTime(), resp.GetInstances(), pre)
	printEvents(e.out, start, notes)
	if len(w.Awaited()) == 0 {
		fmt.Fprintf(e.out, "drill: none of %s's schedulers announced a route: there is nothing to follow\n", *region)
		return nil
	}
	deadline := resp.GetUntil().AsTime().Add(drillwatch.Grace)
	for e.clock.Now().Before(deadline) && !w.Settled(e.clock.Now()) {
		if st, err := e.admin.Status(ctx, &pb.StatusRequest{}); err == nil {
			printEvents(e.out, start, w.Observe(st, e.clock.Now()))
			if len(w.Awaited()) == 0 {
				break // each announces nothing itself: there is nothing to follow
			}
		}
		if err := e.clock.Sleep(ctx, pollEvery); err != nil {
			return err
		}
	}
	if len(w.NotBack()) > 0 {
		if q := w.QoE(); q != nil {
			_ = writeDrillQoE(e.out, *region, q)
		}
		return fmt.Errorf("not every instance announced again within 60 s of the drill's end: %s did not", list(w.NotBack(), "and"))
	}
	if len(w.Awaited()) == 0 {
		return nil // every instance turned out to announce nothing itself (said above)
	}
	if target.Center {
		fmt.Fprintf(e.out, "drill done: the center announces again (status is polled every 250 ms; STB-side figures: the load generator)\n")
		return nil
	}
	writeTakeover(e.out, start, w.Takeover())
	return writeDrillQoE(e.out, *region, w.QoE())
}

// printEvents prints what a drill's watch saw: a timed event at its
// seconds since start, a note as it is.
func printEvents(out io.Writer, start time.Time, evs []drillwatch.Event) {
	for _, ev := range evs {
		if ev.At.IsZero() {
			fmt.Fprintf(out, "  %s\n", ev.Text)
			continue
		}
		fmt.Fprintf(out, "  +%5.1fs  %s\n", ev.At.Sub(start).Seconds(), ev.Text)
	}
}

// writeTakeover prints what the centers answered the drilled city's STBs.
func writeTakeover(out io.Writer, start time.Time, t drillwatch.Takeover) {
	if len(t.Centers) == 0 {
		fmt.Fprintf(out, "drill done: no center answered any request of %s's STBs: there was no traffic from the city\n", t.Region)
		return
	}
	who := "the center (" + t.Centers[0].ID + ")"
	if len(t.Centers) > 1 {
		each := make([]string, len(t.Centers))
		for i, c := range t.Centers {
			each[i] = fmt.Sprintf("%s %d", c.ID, c.Answered)
		}
		who = "the centers (" + strings.Join(each, ", ") + ")"
	}
	printEvents(out, start, []drillwatch.Event{t.GaveBack()})
	fmt.Fprintf(out, "drill done: %s answered %d requests of %s's STBs from +%.1fs to +%.1fs, %d of them with an error; requests lost in flight while routes changed are seen only by the STBs (bin/lab load counts them)\n",
		who, t.Answered, t.Region, t.From.Sub(start).Seconds(), t.Last.Sub(start).Seconds(), t.Failed)
}
