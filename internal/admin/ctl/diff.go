package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/status"
)

// diffCmd compares two kept revisions, a kept revision with the current
// one, or the current topology with a document.
func diffCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("diff", flag.ContinueOnError)
	file := fs.String("f", "", "compare the current topology with this document (YAML); - for standard input")
	o := outputFlag(fs, formatTable, formatJSON, formatYAML)
	revs, err := e.parseMixed(fs, args)
	if err != nil {
		return err
	}
	req := &pb.DiffTopologyRequest{}
	switch {
	case *file != "" && len(revs) > 0:
		return usagef("give -f FILE or revisions, not both")
	case *file != "":
		doc, err := readDocument(e, *file)
		if err != nil {
			return err
		}
		req.Document = doc
	case len(revs) == 0:
		return usagef("missing REV (or -f FILE)")
	case len(revs) > 2:
		return usagef("unexpected argument %q", revs[2])
	default:
		var err error
		if req.FromRevision, err = revision(revs[0]); err != nil {
			return err
		}
		if len(revs) == 2 {
			if req.ToRevision, err = revision(revs[1]); err != nil {
				return err
			}
		}
	}
	resp, err := e.admin.DiffTopology(ctx, req)
	if err != nil {
		return err
	}
	return render(e.out, o, resp, func(w io.Writer) error {
		to := "the document"
		if req.Document == nil {
			to = "revision " + strconv.FormatInt(resp.GetToRevision(), 10)
		}
		from := "revision " + strconv.FormatInt(resp.GetFromRevision(), 10)
		if resp.GetFromRevision() == 0 {
			from = "nothing applied"
		}
		return writeDiff(w, fmt.Sprintf("from %s to %s", from, to), resp.GetDiff())
	})
}

// parseMixed parses flags given before, between or after a command's
// arguments ("diff 3 5 -o json"), and returns the arguments.
func (e *env) parseMixed(fs *flag.FlagSet, args []string) ([]string, error) {
	var out []string
	for {
		if err := e.parseLeading(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return out, nil
		}
		out = append(out, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// revision reads a REV argument.
func revision(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, usagef("%q is not a revision (a positive number; see schedctl history)", s)
	}
	return n, nil
}

// maxListed bounds the names printed per list: the rest is counted.
const maxListed = 20

// writeDiff prints a diff for an operator to read: a summary line, the
// servers and networks before and after, then each kind's removals (-),
// additions (+) and changes (~, with one line per field).
func writeDiff(w io.Writer, title string, d *pb.TopologyDiff) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", title, diffSummary(d))
	if len(d.GetSections()) == 0 {
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "  servers %d -> %d, zone networks %d -> %d\n", d.GetServersBefore(), d.GetServersAfter(), d.GetNetworksBefore(), d.GetNetworksAfter())
	for _, s := range d.GetSections() {
		fmt.Fprintf(&b, "  %s:\n", s.GetKind())
		names := func(mark string, ns []string) {
			for i, n := range ns {
				if i == maxListed {
					fmt.Fprintf(&b, "    %s ... and %d more\n", mark, listed(ns)-maxListed)
					return
				}
				fmt.Fprintf(&b, "    %s %s\n", mark, n)
			}
		}
		names("-", s.GetRemoved())
		names("+", s.GetAdded())
		for i, c := range s.GetChanged() {
			if i == maxListed {
				fmt.Fprintf(&b, "    ~ ... and %d more\n", changedCount(s.GetChanged())-maxListed)
				break
			}
			fmt.Fprintf(&b, "    ~ %s\n", c.GetName())
			for _, f := range c.GetFields() {
				fmt.Fprintf(&b, "        %s\n", f)
			}
		}
	}
	if r := d.GetEmptiedRegions(); len(r) > 0 {
		fmt.Fprintf(&b, "  regions left with no server: %s\n", strings.Join(r, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// diffSummary is "+2 servers, -1 node, 3 zones changed", or "no change".
func diffSummary(d *pb.TopologyDiff) string {
	var parts []string
	for _, s := range d.GetSections() {
		if n := listed(s.GetAdded()); n > 0 {
			parts = append(parts, "+"+plural(n, s.GetKind()))
		}
		if n := listed(s.GetRemoved()); n > 0 {
			parts = append(parts, "-"+plural(n, s.GetKind()))
		}
		if n := changedCount(s.GetChanged()); n > 0 {
			parts = append(parts, plural(n, s.GetKind())+" changed")
		}
	}
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, ", ")
}

// listed counts a list the center capped ("... and 1234 more" last).
func listed(ns []string) int {
	if len(ns) == 0 {
		return 0
	}
	var more int
	if _, err := fmt.Sscanf(ns[len(ns)-1], "... and %d more", &more); err == nil {
		return len(ns) - 1 + more
	}
	return len(ns)
}

func changedCount(cs []*pb.DiffChange) int {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.GetName()
	}
	return listed(names)
}

func plural(n int, kinds string) string {
	if n == 1 {
		return "1 " + strings.TrimSuffix(kinds, "s")
	}
	return strconv.Itoa(n) + " " + kinds
}

// refusedDiff is the diff a refusal carries (the removal guard's), nil if none.
func refusedDiff(err error) *pb.TopologyDiff {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if diff, ok := d.(*pb.TopologyDiff); ok {
			return diff
		}
	}
	return nil
}
