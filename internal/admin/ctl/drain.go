package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"

	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/protobuf/proto"
)

// drainCmd takes a server, node or region out of service for new STBs
// until undrain, or for a window (--from, --until) that every scheduler
// follows on its own clock; sessions already playing are not touched. With
// --dry-run it changes nothing and prints what the drain would do to the
// viewers of the QoE services.
func drainCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("drain", flag.ContinueOnError)
	reason := fs.String("reason", "", "why, shown by status and explain")
	dryRun := fs.Bool("dry-run", false, "change nothing: print what the drain would do to the viewers of the QoE services, per scheduler planning the region "+
		"(how many would move at the same bitrate, at a lower one, to the fallback, and the change of the QoE objective)")
	force := fs.Bool("force", false, "drain past the removal guard: a region left with no serving server, or more than apply.max_removal_share of the province's servers out of service, or a window longer than 7 days (admin)")
	from := fs.String("from", "", "start the drain then, not now: "+timeForms)
	until := fs.String("until", "", "end the drain then by itself (from now, or from --from; +DURATION counts from there): "+timeForms+"; without it the drain stays until undrain")
	kind, name, err := drainTarget(e, fs, args)
	if err != nil {
		return err
	}
	f, u, err := window(e, *from, *until)
	if err != nil {
		return err
	}
	resp, err := e.admin.Drain(ctx, &pb.DrainRequest{Kind: kind, Name: name, Reason: *reason, DryRun: *dryRun, Force: *force, From: f, Until: u})
	if err != nil {
		return err
	}
	if *dryRun {
		return printForecast(e, kind, name, resp)
	}
	done := fmt.Sprintf("drained %s %s (%s): no new STBs go there", kind, name, plural(int(resp.GetServers()), "servers"))
	if w := windowWords(e, resp.GetFrom(), resp.GetUntil()); w != "" {
		done = fmt.Sprintf("scheduled: %s %s (%s) drained %s; every scheduler applies it on its own clock", kind, name, plural(int(resp.GetServers()), "servers"), w)
	}
	return changed(e, resp, done, kind+" "+name+" was already drained")
}

// drainsCmd lists the drains stored, with their windows and states.
func drainsCmd(ctx context.Context, e *env, args []string) error {
	return showStatus(ctx, e, "drains", args, func(st *pb.StatusResponse) (proto.Message, func() []*table) {
		return &pb.StatusResponse{Drains: st.GetDrains()}, func() []*table { return []*table{drainTable(st)} }
	})
}

// printForecast prints a dry run's answer: what the drain would change,
// then per scheduler planning the region what it would do to its viewers,
// and the total.
func printForecast(e *env, kind, name string, resp *pb.DrainResponse) error {
	var b strings.Builder
	if resp.GetChanged() {
		fmt.Fprintf(&b, "dry run, nothing changed: draining %s %s (%s) would send no new STBs there\n", kind, name, plural(int(resp.GetServers()), "servers"))
	} else {
		fmt.Fprintf(&b, "dry run, nothing changed: %s %s is already drained\n", kind, name)
	}
	if r := resp.GetRefused(); r != "" {
		fmt.Fprintf(&b, "the drain would be refused: %s\n", strings.TrimPrefix(r, "refused: "))
	}
	fcs := resp.GetForecast()
	if len(fcs) == 0 {
		b.WriteString("no QoE plan to forecast from: the region's services select servers by something other than qoe, or none of its schedulers has planned lately\n")
		_, err := io.WriteString(e.out, b.String())
		return err
	}
	where := "on " + name
	switch kind {
	case "node":
		where = "on node " + name
	case "region":
		where = "in region " + name
	}
	var total pb.DrainForecast
	for _, f := range fcs {
		fmt.Fprintf(&b, "%s: %s\n", f.GetInstance(), forecastLine(kind, where, f))
		total.Sessions += f.GetSessions()
		total.SameRung += f.GetSameRung()
		total.LowerRung += f.GetLowerRung()
		total.ToFallback += f.GetToFallback()
		total.ObjectiveDelta += f.GetObjectiveDelta()
		total.Objective += f.GetObjective()
	}
	fmt.Fprintf(&b, "total: %s\n", forecastLine(kind, "", &total))
	_, err := io.WriteString(e.out, b.String())
	return err
}

// forecastLine is one forecast in words: where (e.g. "on edge-1", "" in
// the total) the viewers are, where they would go, and the QoE change.
func forecastLine(kind, where string, f *pb.DrainForecast) string {
	if where != "" {
		where = " " + where
	}
	n := f.GetSessions()
	if n == 0 {
		return "no viewers" + where
	}
	if kind == "region" {
		// The schedulers do not price a region drain: the QoE it costs is
		// not known.
		return fmt.Sprintf("%s%s would go to the fallback; the change of the QoE objective is not forecast for a region", viewers(n), where)
	}
	s := fmt.Sprintf("%s%s would move: %d at the same bitrate, %d lower, %d to the fallback; QoE objective %+.1f",
		viewers(n), where, f.GetSameRung(), f.GetLowerRung(), f.GetToFallback(), f.GetObjectiveDelta())
	if obj := f.GetObjective(); obj != 0 {
		s += fmt.Sprintf(" (%+.1f%% of %.1f)", 100*f.GetObjectiveDelta()/math.Abs(obj), obj)
	}
	return s
}

func viewers(n int64) string {
	if n == 1 {
		return "1 viewer"
	}
	return fmt.Sprintf("%d viewers", n)
}

// undrainCmd puts a drained target back in service.
func undrainCmd(ctx context.Context, e *env, args []string) error {
	kind, name, err := drainTarget(e, flag.NewFlagSet("undrain", flag.ContinueOnError), args)
	if err != nil {
		return err
	}
	resp, err := e.admin.Undrain(ctx, &pb.UndrainRequest{Kind: kind, Name: name})
	if err != nil {
		return err
	}
	return changed(e, resp, fmt.Sprintf("undrained %s %s (%s)", kind, name, plural(int(resp.GetServers()), "servers")), kind+" "+name+" was not drained")
}

// drainTarget is KIND NAME, the two words before the flags, which it
// parses into fs. The kind is checked by the center, which knows the kinds
// it drains.
func drainTarget(e *env, fs *flag.FlagSet, args []string) (kind, name string, err error) {
	if e.help { // drain --help: no target needed
		return "", "", e.parse(fs, args)
	}
	if len(args) < 2 || strings.HasPrefix(args[0], "-") || strings.HasPrefix(args[1], "-") {
		return "", "", usagef("want server|node|region NAME before the flags")
	}
	return args[0], args[1], e.parse(fs, args[2:])
}

// changed prints what a drain or undrain did, or that there was nothing
// to do.
func changed(e *env, resp *pb.DrainResponse, done, nothing string) error {
	msg := nothing
	if resp.GetChanged() {
		msg = done
	}
	_, err := fmt.Fprintln(e.out, msg)
	return err
}
