package ctl

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// applyCmd sends a topology document to be validated and stored; the
// center validates it (every problem comes back named by its field path).
// It asks the center for the diff first (a dry run), prints it, and
// applies only once confirmed: --yes, or "y" on a terminal.
func applyCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	file := fs.String("f", "", "topology file (YAML); - for standard input")
	dry := fs.Bool("dry-run", false, "validate on the server and print the diff, store nothing")
	yes := fs.Bool("yes", false, "apply without asking (scripts)")
	force := fs.Bool("force", false, "apply even if the document is based on an older revision (operator), or past the removal guard (admin)")
	base := fs.Int64("base-revision", 0, "the revision the document was based on (default: its revision: field)")
	o := outputFlag(fs, formatTable, formatJSON)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if err := need("-f FILE", *file); err != nil {
		return err
	}
	doc, err := readDocument(e, *file)
	if err != nil {
		return err
	}
	req := &pb.ApplyTopologyRequest{Document: doc, DryRun: true, Force: *force, BaseRevision: *base}
	plan, err := e.admin.ApplyTopology(ctx, req)
	if err != nil {
		return showRefusal(e, o, err)
	}
	if err := showPlan(e, o, plan); err != nil {
		return err
	}
	if *dry {
		if o.format == formatTable {
			if plan.GetChanged() {
				fmt.Fprintf(e.out, "valid: %s; would replace revision %d\n", counts(plan.GetSummary()), plan.GetRevision())
			} else {
				fmt.Fprintf(e.out, "valid: %s; identical to revision %d\n", counts(plan.GetSummary()), plan.GetRevision())
			}
		}
		return nil
	}
	if !plan.GetChanged() {
		if o.format == formatTable {
			fmt.Fprintf(e.out, "unchanged: revision %d already holds this topology\n", plan.GetRevision())
		}
		return nil
	}
	if !*yes {
		if err := confirm(e, *file, fmt.Sprintf("apply this change over revision %d?", plan.GetRevision())); err != nil {
			return err
		}
	}
	req.DryRun = false
	if !*force {
		// What was confirmed is the diff against this revision: if another
		// apply came in between, refuse rather than apply something else.
		req.BaseRevision = plan.GetRevision()
	}
	resp, err := e.admin.ApplyTopology(ctx, req)
	if err != nil {
		return showRefusal(e, o, err)
	}
	return showResult(e, o, resp, "applied")
}

// showPlan prints a dry run's diff and warnings.
func showPlan(e *env, o *output, plan *pb.ApplyTopologyResponse) error {
	if o.format == formatJSON {
		return writeJSON(e.out, plan)
	}
	title := fmt.Sprintf("changes against revision %d", plan.GetRevision())
	if plan.GetRevision() == 0 {
		title = "changes (nothing applied yet)"
	}
	if err := writeDiff(e.out, title, plan.GetDiff()); err != nil {
		return err
	}
	for _, w := range plan.GetWarnings() {
		fmt.Fprintf(e.out, "warning: %s\n", w)
	}
	return nil
}

// showResult prints what an apply or rollback did.
func showResult(e *env, o *output, resp *pb.ApplyTopologyResponse, verb string) error {
	if o.format == formatJSON {
		return writeJSON(e.out, resp)
	}
	if resp.GetApplied() {
		fmt.Fprintf(e.out, "%s revision %d: %s\n", verb, resp.GetRevision(), counts(resp.GetSummary()))
	} else {
		fmt.Fprintf(e.out, "unchanged: revision %d already holds this topology\n", resp.GetRevision())
	}
	return nil
}

// showRefusal prints the diff a refusal carries (what the guard refused)
// before the error itself.
func showRefusal(e *env, o *output, err error) error {
	if d := refusedDiff(err); d != nil && o.format == formatTable {
		if werr := writeDiff(e.out, "refused change", d); werr != nil {
			return werr
		}
	}
	return err
}

func counts(s *pb.TopologySummary) string {
	return fmt.Sprintf("%d regions, %d nodes, %d servers, %d zones (%d networks), %d services", s.GetRegions(), s.GetNodes(), s.GetServers(), s.GetZones(), s.GetNetworks(), s.GetServices())
}

// errNotConfirmed: the operator answered no.
var errNotConfirmed = errors.New("not confirmed: nothing was changed")

// confirm asks question on the terminal; without one (a script, or the
// document on standard input) it refuses and says to pass --yes.
func confirm(e *env, file, question string) error {
	if file == "-" || e.isTerminal == nil || !e.isTerminal() {
		return errors.New("not applied: no terminal to confirm on; check the diff above and pass --yes")
	}
	fmt.Fprintf(e.errOut, "%s [y/N] ", question)
	line, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the answer: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return errNotConfirmed
}

// readDocument reads -f: a file, or standard input for "-".
func readDocument(e *env, file string) ([]byte, error) {
	var doc []byte
	var err error
	if file == "-" {
		doc, err = io.ReadAll(e.stdin)
	} else {
		doc, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("-f: %w", err)
	}
	if len(bytes.TrimSpace(doc)) == 0 {
		// Likely a pipeline whose first command failed: say so here rather
		// than have the center list every section as missing.
		return nil, fmt.Errorf("-f %s: the document is empty", file)
	}
	return doc, nil
}
