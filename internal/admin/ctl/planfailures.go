package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// planCmd: plan failures, the N-1 plan of the center's admin API.
func planCmd(ctx context.Context, e *env, args []string) error {
	if e.help && (len(args) == 0 || args[0] != "failures") {
		return e.helpEach(ctx, planCmd, "failures")
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usagef("plan what? failures")
	}
	if args[0] != "failures" {
		return usagef("unknown plan command %q: want failures", args[0])
	}
	return planFailures(ctx, e, args[1:])
}

// planFailuresTimeout bounds the command without --timeout: a province's
// plan is a few solves a city, each within its budget.
const planFailuresTimeout = 10 * time.Minute

func planFailures(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("plan failures", flag.ContinueOnError)
	var regions strList
	fs.Var(&regions, "region", "a city to plan the loss of (repeat; default every one)")
	budget := fs.Duration("budget", time.Second, "each solve's budget (at most 10s)")
	o := outputFlag(fs, formatTable, formatJSON, formatYAML)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if *budget < time.Millisecond || *budget > 10*time.Second {
		return usagef("--budget %v: want 1ms to 10s", *budget)
	}
	resp, err := e.admin.PlanFailures(ctx, &pb.PlanFailuresRequest{Regions: regions, BudgetMs: int32(budget.Milliseconds())})
	if err != nil {
		return err
	}
	return render(e.out, o, resp, func(w io.Writer) error { return writeFailurePlans(w, resp) })
}

// writeFailurePlans prints the configured orders' outcome, then the
// proposal's, a row a city with viewers.
func writeFailurePlans(w io.Writer, resp *pb.PlanFailuresResponse) error {
	conf := newTable("CITY", "VIEWERS", "FALLBACK", "PLANNED", "AT_DESIRED", "MEAN_KBPS", "UNPLANNED", "TAKEN_BY", "HOSTS_AT_DESIRED", "GAP")
	conf.title = fmt.Sprintf("the loss of each city on topology revision %d, its configured fallback order (the center plans its viewers on what the hosts' planners leave):", resp.GetRevision())
	prop := newTable("CITY", "PROPOSED", "PLANNED", "AT_DESIRED", "MEAN_KBPS", "UNPLANNED", "RESERVE", "SHORT")
	prop.title = "proposed: the order and reserves of a plan where the nearest cities may serve too (RESERVE: capacity to hold free for the city's viewers at their desired bitrates):"
	idle := []string{}
	for _, c := range resp.GetCities() {
		if c.GetViewers() == 0 {
			idle = append(idle, c.GetRegion())
			continue
		}
		k := c.GetConfigured()
		conf.add(c.GetRegion(), c.GetViewers(), orDash(strings.Join(append(slices.Clone(c.GetOrder()), "center"), " > ")),
			k.GetPlanned(), ofPlanned(k), kbpsCell(k), k.GetUnplanned(), orDash(takenCell(k.GetTaken())), shareCell(k.GetHostsAtDesired()), gapCell(k.GetGap()))
		p := c.GetProposedOutcome()
		prop.add(c.GetRegion(), orDash(strings.Join(c.GetProposed(), " > ")), p.GetPlanned(), ofPlanned(p), kbpsCell(p), p.GetUnplanned(),
			orDash(reserveCell(c.GetReserves())), mbps(c.GetShortKbps()))
	}
	if err := writeTables(w, conf, prop); err != nil {
		return err
	}
	if len(idle) > 0 {
		fmt.Fprintf(w, "no viewers known (nothing to plan): %s\n", strings.Join(idle, ", "))
	}
	if s := resp.GetStale(); len(s) > 0 {
		fmt.Fprintf(w, "warning: no plan state newer than a minute from %s: their viewers are as last published, or none\n", strings.Join(s, ", "))
	}
	return nil
}

func ofPlanned(o *pb.FailureOutcome) string {
	if o.GetPlanned() == 0 {
		return "-"
	}
	return fmt.Sprintf("%d (%.0f%%)", o.GetAtDesired(), 100*float64(o.GetAtDesired())/float64(o.GetPlanned()))
}

func kbpsCell(o *pb.FailureOutcome) string {
	if o.GetPlanned() == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", o.GetMeanKbps())
}

func takenCell(ts []*pb.FailureTake) string {
	var parts []string
	for _, t := range ts {
		if t.GetViewers() > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", t.GetRegion(), t.GetViewers()))
		}
	}
	return strings.Join(parts, ", ")
}

func reserveCell(rs []*pb.FailureReserve) string {
	var parts []string
	for _, r := range rs {
		if r.GetReserveKbps() > 0 {
			parts = append(parts, fmt.Sprintf("%s %s of %s spare", r.GetRegion(), mbps(r.GetReserveKbps()), mbps(r.GetSpareKbps())))
		}
	}
	return strings.Join(parts, ", ")
}

func mbps(kbps float64) string {
	if kbps <= 0 {
		return "0"
	}
	return fmt.Sprintf("%.1f Mbps", kbps/1000)
}

func shareCell(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*v)
}

func gapCell(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", 100*v)
}
