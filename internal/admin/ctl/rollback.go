package ctl

import (
	"context"
	"flag"
	"fmt"

	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// rollbackCmd makes a kept revision's document current again (a new
// revision), after showing the diff and a confirmation like apply.
func rollbackCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("rollback", flag.ContinueOnError)
	dry := fs.Bool("dry-run", false, "print the diff, change nothing")
	yes := fs.Bool("yes", false, "roll back without asking (scripts)")
	force := fs.Bool("force", false, "roll back past the removal guard (admin)")
	o := outputFlag(fs, formatTable, formatJSON)
	revs, err := e.parseMixed(fs, args) // "rollback 42 --yes" too
	if err != nil {
		return err
	}
	switch {
	case len(revs) == 0:
		return usagef("missing REV (see schedctl history)")
	case len(revs) > 1:
		return usagef("unexpected argument %q", revs[1])
	}
	rev, err := revision(revs[0])
	if err != nil {
		return err
	}
	req := &pb.RollbackRequest{Revision: rev, DryRun: true, Force: *force}
	plan, err := e.admin.Rollback(ctx, req)
	if err != nil {
		return showRefusal(e, o, err)
	}
	if err := showPlan(e, o, plan); err != nil {
		return err
	}
	if *dry {
		return nil
	}
	if !plan.GetChanged() {
		if o.format == formatTable {
			fmt.Fprintf(e.out, "unchanged: revision %d already holds revision %d's topology\n", plan.GetRevision(), rev)
		}
		return nil
	}
	if !*yes {
		if err := confirm(e, "", fmt.Sprintf("roll back to revision %d over revision %d?", rev, plan.GetRevision())); err != nil {
			return err
		}
	}
	// Guarded by the revision the diff was made against.
	req.DryRun, req.BaseRevision = false, plan.GetRevision()
	resp, err := e.admin.Rollback(ctx, req)
	if err != nil {
		return showRefusal(e, o, err)
	}
	return showResult(e, o, resp, fmt.Sprintf("rolled back to %d as", rev))
}
