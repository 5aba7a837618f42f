package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/anysched/anysched/internal/stb/balance"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"gopkg.in/yaml.v3"
)

// balanceCmd reads and changes the in-node balance policy document
// (docs/operations.md, "Choosing inside a node"): get, set -f FILE, reset.
func balanceCmd(ctx context.Context, e *env, args []string) error {
	if e.help && (len(args) == 0 || !slices.Contains([]string{"get", "set", "reset"}, args[0])) {
		return e.helpEach(ctx, balanceCmd, "get", "set", "reset")
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usagef("balance what? get, set or reset")
	}
	switch args[0] {
	case "get":
		return balanceGet(ctx, e, args[1:])
	case "set":
		return balanceSet(ctx, e, args[1:], false)
	case "reset":
		return balanceSet(ctx, e, args[1:], true)
	}
	return usagef("unknown balance command %q: want get, set or reset", args[0])
}

func balanceGet(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("balance get", flag.ContinueOnError)
	o := outputFlag(fs, formatTable, formatYAML, formatJSON)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	resp, err := e.admin.GetBalance(ctx, &pb.GetBalanceRequest{})
	if err != nil {
		return err
	}
	v, err := newBalanceView(resp)
	if err != nil {
		return err
	}
	return render(e.out, o, v, func(w io.Writer) error { return writeBalance(w, resp) })
}

// balanceSet sends a document (reset: none) for a dry run, prints what it
// changes, and stores it once confirmed (--yes, or "y" on a terminal),
// guarded by the revision the change was shown against.
func balanceSet(ctx context.Context, e *env, args []string, reset bool) error {
	name := "balance set"
	if reset {
		name = "balance reset"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var file *string
	if !reset {
		file = fs.String("f", "", "balance policy file (YAML); - for standard input")
	}
	dry := fs.Bool("dry-run", false, "validate on the server and print the change, store nothing")
	yes := fs.Bool("yes", false, "store without asking (scripts)")
	force := new(bool) // reset takes no server out of service
	if !reset {
		force = fs.Bool("force", false, "store a policy whose zero weights take servers out of service past the removal guard: a region left with no serving server, or more than apply.max_removal_share of the province's servers out of service (admin)")
	}
	o := outputFlag(fs, formatTable, formatJSON)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	var doc []byte
	src := "-"
	if !reset {
		if err := need("-f FILE", *file); err != nil {
			return err
		}
		var err error
		if doc, err = readDocument(e, *file); err != nil {
			return err
		}
		src = *file
	}
	cur, err := e.admin.GetBalance(ctx, &pb.GetBalanceRequest{})
	if err != nil {
		return err
	}
	base := cur.GetRevision()
	if base == 0 {
		base = -1 // none stored: refused if one is by the time this is
	}
	req := &pb.SetBalanceRequest{Document: doc, DryRun: true, BaseRevision: base, Force: *force}
	plan, err := e.admin.SetBalance(ctx, req)
	if err != nil {
		return err
	}
	if o.format == formatTable {
		if err := writeBalanceChange(e.out, cur, plan); err != nil {
			return err
		}
	}
	if *dry || !plan.GetChanged() {
		if o.format == formatJSON {
			return writeJSON(e.out, mustView(plan))
		}
		if !plan.GetChanged() {
			fmt.Fprintln(e.out, "unchanged: the center already holds this document")
		} else {
			fmt.Fprintln(e.out, "valid; nothing stored (--dry-run)")
		}
		return nil
	}
	if !*yes {
		q := "store this balance policy?"
		if reset {
			q = "remove the balance policy document (the defaults apply)?"
		}
		if err := confirm(e, src, q); err != nil {
			return err
		}
	}
	req.DryRun = false
	resp, err := e.admin.SetBalance(ctx, req)
	if err != nil {
		return err
	}
	if o.format == formatJSON {
		return writeJSON(e.out, mustView(resp))
	}
	if reset {
		fmt.Fprintln(e.out, "reset: no document stored, the defaults apply; every scheduler reloads within a second")
	} else {
		fmt.Fprintf(e.out, "stored at revision %d; every scheduler reloads it within a second\n", resp.GetRevision())
	}
	return nil
}

// balanceView is a BalanceResponse for -o json and yaml: the documents as
// text and the effective policy as a structure, not as base64.
type balanceView struct {
	Revision  int64          `json:"revision" yaml:"revision"`
	Stored    string         `json:"stored" yaml:"stored"`
	Invalid   string         `json:"invalid,omitempty" yaml:"invalid,omitempty"`
	Changed   bool           `json:"changed,omitempty" yaml:"changed,omitempty"`
	Effective map[string]any `json:"effective" yaml:"effective"`
	Weights   []*weightView  `json:"weights,omitempty" yaml:"weights,omitempty"`
}

type weightView struct {
	Server    string  `json:"server" yaml:"server"`
	Topology  int32   `json:"topology" yaml:"topology"`
	Effective float64 `json:"effective" yaml:"effective"`
	Why       string  `json:"why" yaml:"why"`
}

func newBalanceView(r *pb.BalanceResponse) (*balanceView, error) {
	v := &balanceView{Revision: r.GetRevision(), Stored: string(r.GetDocument()), Invalid: r.GetInvalid(), Changed: r.GetChanged()}
	if err := yaml.Unmarshal(r.GetEffective(), &v.Effective); err != nil {
		return nil, fmt.Errorf("the server sent an effective policy this schedctl cannot read: %w", err)
	}
	for _, w := range r.GetWeights() {
		v.Weights = append(v.Weights, &weightView{w.GetServer(), w.GetTopology(), w.GetEffective(), w.GetWhy()})
	}
	return v, nil
}

func mustView(r *pb.BalanceResponse) any {
	if v, err := newBalanceView(r); err == nil {
		return v
	}
	return r
}

// writeBalance is balance get's text: the stored document, the effective
// policy, and the servers weighed otherwise than the topology.
func writeBalance(w io.Writer, r *pb.BalanceResponse) error {
	if len(r.GetDocument()) == 0 {
		fmt.Fprintln(w, "stored: none (the defaults apply)")
	} else {
		fmt.Fprintf(w, "stored at revision %d:\n%s", r.GetRevision(), indent(r.GetDocument()))
	}
	if r.GetInvalid() != "" {
		fmt.Fprintf(w, "INVALID, the defaults apply instead:\n%s", indent([]byte(r.GetInvalid()+"\n")))
	}
	fmt.Fprintf(w, "effective policy:\n%s", indent(r.GetEffective()))
	if len(r.GetWeights()) == 0 {
		fmt.Fprintln(w, "every server weighs what the topology says")
		return nil
	}
	t := newTable("SERVER", "TOPOLOGY", "EFFECTIVE", "WHY")
	t.title = "servers the center's engine weighs otherwise than the topology"
	for _, sw := range r.GetWeights() {
		t.add(sw.GetServer(), sw.GetTopology(), strconv.FormatFloat(sw.GetEffective(), 'f', -1, 64), sw.GetWhy())
	}
	return writeTables(w, t)
}

// writeBalanceChange prints what a set changes in the effective policy.
func writeBalanceChange(w io.Writer, cur, plan *pb.BalanceResponse) error {
	from, err := balance.ParseConfig(cur.GetEffective())
	if err != nil {
		return fmt.Errorf("the server sent an effective policy this schedctl cannot read: %w", err)
	}
	to, err := balance.ParseConfig(plan.GetEffective())
	if err != nil {
		return fmt.Errorf("the server sent an effective policy this schedctl cannot read: %w", err)
	}
	what := "the stored document"
	if len(cur.GetDocument()) == 0 {
		what = "the defaults (no document stored)"
	}
	d := balance.Diff(from, to)
	if len(d) == 0 {
		fmt.Fprintf(w, "effective policy: no change against %s\n", what)
		return nil
	}
	fmt.Fprintf(w, "effective policy, against %s:\n", what)
	for _, l := range d {
		fmt.Fprintf(w, "  ~ %s\n", l)
	}
	return nil
}

func indent(b []byte) string {
	s := strings.TrimRight(string(b), "\n")
	return "  " + strings.ReplaceAll(s, "\n", "\n  ") + "\n"
}
