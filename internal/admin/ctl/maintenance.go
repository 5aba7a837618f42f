package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// maintenanceCmd schedules a city's maintenance window (its region drained
// and its schedulers' route withdrawn, both ending by themselves), lists
// the windows or cancels one.
func maintenanceCmd(ctx context.Context, e *env, args []string) error {
	return e.dispatch(ctx, args, []subcommand{{"list", maintenanceListCmd}, {"cancel", maintenanceCancelCmd}}, maintenanceScheduleCmd, "")
}

func maintenanceScheduleCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("maintenance", flag.ContinueOnError)
	from := fs.String("from", "", "start of the window (default now): "+timeForms)
	until := fs.String("until", "", "end of the window, at most 7 days after its start (required; +DURATION counts from --from): "+timeForms)
	reason := fs.String("reason", "", "why, shown by status, explain and maintenance list")
	dryRun := fs.Bool("dry-run", false, "change nothing: print what the window would do (the servers drained, the viewers moved, the route withdrawn)")
	force := fs.Bool("force", false, "schedule past the removal guard: more than apply.max_removal_share of the province's servers out of service in the window")
	region := ""
	if !e.help {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			return usagef("want REGION before the flags (or list, or cancel REGION)")
		}
		region, args = args[0], args[1:]
	}
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if err := need("--until", *until); err != nil {
		return err
	}
	f, u, err := window(e, *from, *until)
	if err != nil {
		return err
	}
	resp, err := e.admin.Maintenance(ctx, &pb.MaintenanceRequest{Region: region, From: f, Until: u, Reason: *reason, DryRun: *dryRun, Force: *force})
	if err != nil {
		return err
	}
	w := resp.GetWindow()
	span := windowWords(e, w.GetFrom(), w.GetUntil())
	var b strings.Builder
	switch {
	case *dryRun:
		fmt.Fprintf(&b, "dry run, nothing changed: maintenance of %s %s would\n", region, span)
		fmt.Fprintf(&b, "  drain region %s (%s): no new STBs go there\n", region, plural(int(resp.GetServers()), "servers"))
	case resp.GetChanged():
		fmt.Fprintf(&b, "maintenance of %s scheduled %s:\n", region, span)
		fmt.Fprintf(&b, "  region %s drained (%s): no new STBs go there\n", region, plural(int(resp.GetServers()), "servers"))
	default:
		fmt.Fprintf(&b, "maintenance of %s was already scheduled %s\n", region, span)
	}
	route := resp.GetRoute()
	if len(resp.GetInstances()) > 0 {
		route += " (" + strings.Join(resp.GetInstances(), ", ") + ")"
	}
	fmt.Fprintf(&b, "  route: %s\n", route)
	if r := resp.GetRefused(); r != "" {
		fmt.Fprintf(&b, "the window would be refused: %s\n", strings.TrimPrefix(r, "refused: "))
	}
	if *dryRun {
		for _, fc := range resp.GetForecast() {
			fmt.Fprintf(&b, "  %s: %s\n", fc.GetInstance(), forecastLine("region", "in region "+region, fc))
		}
		if len(resp.GetForecast()) == 0 {
			b.WriteString("  viewers: no QoE plan to forecast from (no scheduler of the region has planned lately)\n")
		}
	} else if resp.GetChanged() {
		fmt.Fprintf(&b, "both end by themselves at the window's end; cancel with: schedctl maintenance cancel %s\n", region)
	}
	_, err = io.WriteString(e.out, b.String())
	return err
}

func maintenanceListCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("maintenance list", flag.ContinueOnError)
	o := outputFlag(fs, formatTable, formatYAML, formatJSON)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	resp, err := e.admin.ListMaintenance(ctx, &pb.ListMaintenanceRequest{})
	if err != nil {
		return err
	}
	return render(e.out, o, resp, func(w io.Writer) error {
		if len(resp.GetWindows()) == 0 {
			_, err := fmt.Fprintln(w, "no maintenance window")
			return err
		}
		t := newTable("REGION", "STATE", "FROM", "UNTIL", "DRAINED", "ROUTE", "REASON")
		for _, mw := range resp.GetWindows() {
			route := "announced"
			if mw.GetWithdrawn() {
				route = "withdrawn"
			}
			t.add(mw.GetRegion(), mw.GetState(), when(e, mw.GetFrom().AsTime()), when(e, mw.GetUntil().AsTime()), mw.GetDrained(), route, orDash(mw.GetReason()))
		}
		return writeTables(w, t)
	})
}

func maintenanceCancelCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("maintenance cancel", flag.ContinueOnError)
	region := ""
	if !e.help {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			return usagef("want REGION")
		}
		region, args = args[0], args[1:]
	}
	if err := e.parse(fs, args); err != nil {
		return err
	}
	resp, err := e.admin.CancelMaintenance(ctx, &pb.CancelMaintenanceRequest{Region: region})
	if err != nil {
		return err
	}
	msg := "no maintenance window of " + region + " to cancel"
	if resp.GetChanged() {
		msg = fmt.Sprintf("maintenance of %s cancelled (%s): its drain and its route's withdrawal removed; it serves and announces again", region, resp.GetWindow().GetState())
	}
	_, err = fmt.Fprintln(e.out, msg)
	return err
}
