package ctl

import (
	"context"
	"flag"
	"fmt"
	"strings"

	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// drainCmd takes a server, node or region out of service for new STBs
// until undrain; sessions already playing are not touched.
func drainCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("drain", flag.ContinueOnError)
	reason := fs.String("reason", "", "why, shown by status and explain")
	kind, name, err := drainTarget(e, fs, args)
	if err != nil {
		return err
	}
	resp, err := e.admin.Drain(ctx, &pb.DrainRequest{Kind: kind, Name: name, Reason: *reason})
	if err != nil {
		return err
	}
	return changed(e, resp, fmt.Sprintf("drained %s %s (%d servers): no new STBs go there", kind, name, resp.GetServers()), kind+" "+name+" was already drained")
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
	return changed(e, resp, fmt.Sprintf("undrained %s %s (%d servers)", kind, name, resp.GetServers()), kind+" "+name+" was not drained")
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
