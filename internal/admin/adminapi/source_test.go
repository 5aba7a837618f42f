package adminapi

import (
	"bytes"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/testbed/fixture"
	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// commented is a document as an operator keeps it: comments everywhere,
// flow style, no revision line.
func commented(t *testing.T, tp *topology.Topology) []byte {
	t.Helper()
	return append([]byte("# Province of the test, kept in git.\n# Owner: the NOC.\n\n"),
		bytes.ReplaceAll(yamlDoc(t, tp), []byte("\nnodes:\n"), []byte("\n# edge nodes, by city\nnodes: # see the rack plan\n"))...)
}

// Get topology returns the document as written, comments
// and all, with the revision for the stale check; the edited text applies
// back; a rollback re-applies the text of its revision.
func TestGetTopologyAsWritten(t *testing.T) {
	s, _ := applyService(t)
	ctx, _ := as(t, authz.Operator)
	doc1 := commented(t, fixture.Province(t))
	r1, err := s.ApplyTopology(ctx, &pb.ApplyTopologyRequest{Document: doc1})
	if err != nil || !r1.GetApplied() {
		t.Fatalf("apply: %v, %v", r1, err)
	}
	got, err := s.GetTopology(ctx, &pb.GetTopologyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	header := "# Province of the test, kept in git.\n# Owner: the NOC.\n\n"
	want := append([]byte(header+"revision: "+itoa(r1.GetRevision())+"\n"), doc1[len(header):]...)
	if !bytes.Equal(got.GetDocument(), want) {
		t.Fatalf("get topology:\n%s\nwant the document as written with its revision:\n%s", got.GetDocument(), want)
	}

	// Edit what get printed and apply it: the revision line passes the
	// stale check, and the edited text (its revision line updated) is kept.
	edited := bytes.Replace(got.GetDocument(), []byte("# Owner: the NOC."), []byte("# Owner: the NOC (weights raised)."), 1)
	edited = bytes.Replace(edited, []byte("weight: 100"), []byte("weight: 150"), 1)
	r2, err := s.ApplyTopology(ctx, &pb.ApplyTopologyRequest{Document: edited})
	if err != nil || !r2.GetApplied() {
		t.Fatalf("apply of the edited get output: %v, %v", r2, err)
	}
	got2, err := s.GetTopology(ctx, &pb.GetTopologyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want2 := bytes.Replace(edited, []byte("revision: "+itoa(r1.GetRevision())), []byte("revision: "+itoa(r2.GetRevision())), 1)
	if !bytes.Equal(got2.GetDocument(), want2) {
		t.Errorf("get after the second apply:\n%s\nwant\n%s", got2.GetDocument(), want2)
	}
	// The first text applied again is stale now.
	if _, err := s.ApplyTopology(ctx, &pb.ApplyTopologyRequest{Document: got.GetDocument()}); err == nil || !strings.Contains(err.Error(), "is based on revision") {
		t.Errorf("stale apply: %v", err)
	}

	// A rollback restores the first text, comments and all.
	r3, err := s.Rollback(ctx, &pb.RollbackRequest{Revision: r1.GetRevision(), BaseRevision: r2.GetRevision()})
	if err != nil || !r3.GetApplied() {
		t.Fatalf("rollback: %v, %v", r3, err)
	}
	got3, err := s.GetTopology(ctx, &pb.GetTopologyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want3 := bytes.Replace(got.GetDocument(), []byte("revision: "+itoa(r1.GetRevision())), []byte("revision: "+itoa(r3.GetRevision())), 1)
	if !bytes.Equal(got3.GetDocument(), want3) {
		t.Errorf("get after the rollback:\n%s\nwant\n%s", got3.GetDocument(), want3)
	}

	// Comments alone change nothing, and say so.
	ctx, _ = as(t, authz.Operator)
	only := bytes.Replace(got3.GetDocument(), []byte("kept in git"), []byte("kept in git, reviewed"), 1)
	r4, err := s.ApplyTopology(ctx, &pb.ApplyTopologyRequest{Document: only})
	if err != nil || r4.GetApplied() || len(r4.GetWarnings()) != 1 || !strings.Contains(r4.GetWarnings()[0], "only in comments or layout") {
		t.Errorf("comment-only apply: %v, %v", r4, err)
	}
}

// A QoE service whose zones no server of their region
// covers applies, with a warning per zone naming the nearest server; the
// dry run shows the same warnings.
func TestApplyWarnsUncoveredQoEZones(t *testing.T) {
	s, _ := applyService(t)
	tp := fixture.Province(t)
	tp.Services[0].Selection = topology.SelectQoE
	for i := range tp.Nodes {
		for j := range tp.Nodes[i].Servers {
			tp.Nodes[i].Servers[j].CoverageRadiusM = 300
		}
	}
	for _, dry := range []bool{true, false} {
		ctx, _ := as(t, authz.Operator)
		r, err := s.ApplyTopology(ctx, &pb.ApplyTopologyRequest{Document: yamlDoc(t, tp), DryRun: dry})
		if err != nil {
			t.Fatalf("dry run %v: %v", dry, err)
		}
		if len(r.GetWarnings()) != len(tp.Zones) {
			t.Fatalf("dry run %v: %d warnings, want one per zone (%d): %q", dry, len(r.GetWarnings()), len(tp.Zones), r.GetWarnings())
		}
		w := r.GetWarnings()[0]
		z := tp.Zones[0]
		if !strings.HasPrefix(w, "service "+tp.Services[0].Name+": zone "+z.Name+" (region "+z.Region+") is covered by no server of "+z.Region+": nearest is ") ||
			!strings.HasSuffix(w, " km, coverage_radius_m 300") {
			t.Errorf("warning %q", w)
		}
		if !dry && !r.GetApplied() {
			t.Errorf("not applied: %v", r)
		}
	}
}
