package adminapi

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/province/audit"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/security/signing"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func yamlDoc(t *testing.T, tp *topology.Topology) []byte {
	t.Helper()
	b, err := tp.YAML()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// as is a call context as the auth interceptor makes it, with an audit note.
func as(t *testing.T, role authz.Role) (context.Context, *audit.Note) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return audit.WithNote(authz.NewContext(ctx, authz.Caller{Identity: role.String() + "-1", Role: role, Peer: "192.0.2.1:5000"}))
}

func applyService(t *testing.T) (*Service, *store.Store) {
	st := etcdtest.Start(t).Store()
	key, _ := signing.Generate()
	return &Service{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Apply: ApplyPolicy{Signer: signing.NewSigner(key)}}, st
}

func section(d *pb.TopologyDiff, kind string) *pb.DiffSection {
	for _, s := range d.GetSections() {
		if s.GetKind() == kind {
			return s
		}
	}
	return nil
}

// The finding: a valid document with nodes: [] replaced the whole province
// with no diff. Now it is refused with what it removes (and the diff), an
// operator may not force it, an admin may.
func TestApplyGuardRefusesEmptyingTheProvince(t *testing.T) {
	s, st := applyService(t)
	base := fixture.Province(t, fixture.Cities(4)...) // 4 regions, 8 servers
	ctx, note := as(t, authz.Operator)
	r1, err := s.ApplyTopology(ctx, &pb.ApplyTopologyRequest{Document: yamlDoc(t, base)})
	if err != nil || !r1.GetApplied() {
		t.Fatalf("first apply: %v, %v", r1, err)
	}
	if sec := section(r1.GetDiff(), "servers"); len(sec.GetAdded()) != 8 {
		t.Errorf("first apply's diff: %v", r1.GetDiff())
	}
	if note.Target != "topology" || note.Revision != r1.GetRevision() || !strings.Contains(note.Detail, "+8 servers") {
		t.Errorf("audit note %+v", note)
	}

	empty := *base
	empty.Nodes = []topology.Node{}
	doc := yamlDoc(t, &empty)
	for _, dry := range []bool{true, false} {
		ctx, _ := as(t, authz.Operator)
		_, err = s.ApplyTopology(ctx, &pb.ApplyTopologyRequest{Document: doc, DryRun: dry})
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "removes every node (4)") ||
			!strings.Contains(err.Error(), "removes 8 of 8 servers (100% > 20%)") || !strings.Contains(err.Error(), "--force as admin") {
			t.Fatalf("nodes: [] (dry run %v): %v", dry, err)
		}
		var diff *pb.TopologyDiff
		for _, d := range status.Convert(err).Details() {
			diff, _ = d.(*pb.TopologyDiff)
		}
		if diff.GetServersBefore() != 8 || diff.GetServersAfter() != 0 || len(diff.GetEmptiedRegions()) != 4 {
			t.Errorf("the refusal's diff: %v", diff)
		}
	}
	// An operator's --force is not enough.
	_, err = s.ApplyTopology(ctx, &pb.ApplyTopologyRequest{Document: doc, Force: true})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "needs the admin role") {
		t.Fatalf("forced by an operator: %v", err)
	}
	if cur, _ := st.Current(ctx); cur.Revision != r1.GetRevision() {
		t.Fatalf("a refused apply changed the store: revision %d", cur.Revision)
	}

	// A small change passes; emptying one region of four does not.
	small := fixture.Province(t, fixture.Cities(4)...)
	small.Nodes[0].Servers[0].Capacity.BandwidthMbps = 1234
	r2, err := s.ApplyTopology(ctx, &pb.ApplyTopologyRequest{Document: yamlDoc(t, small), BaseRevision: r1.GetRevision()})
	if err != nil || !r2.GetApplied() {
		t.Fatalf("small change: %v, %v", r2, err)
	}
	if ch := section(r2.GetDiff(), "servers").GetChanged(); len(ch) != 1 || !strings.HasPrefix(ch[0].GetFields()[0], "bandwidth_mbps: ") {
		t.Errorf("small change's diff: %v", r2.GetDiff())
	}
	oneRegion := fixture.Province(t, fixture.Cities(4)...)
	oneRegion.Nodes = oneRegion.Nodes[1:]
	_, err = s.ApplyTopology(ctx, &pb.ApplyTopologyRequest{Document: yamlDoc(t, oneRegion)})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "leaves 1 region with no server") {
		t.Fatalf("emptying a region: %v", err)
	}

	// An admin may force it; the response says it was forced.
	actx, anote := as(t, authz.Admin)
	r3, err := s.ApplyTopology(actx, &pb.ApplyTopologyRequest{Document: doc, Force: true})
	if err != nil || !r3.GetApplied() || len(r3.GetWarnings()) != 1 || !strings.Contains(r3.GetWarnings()[0], "forced past the removal guard") {
		t.Fatalf("forced by an admin: %v, %v", r3, err)
	}
	if !strings.Contains(anote.Detail, "-4 nodes, -8 servers") {
		t.Errorf("audit note %+v", anote)
	}
}

// History, diff and rollback: a rollback is a new revision holding the old
// document, refused on a stale base, guarded like an apply.
func TestHistoryDiffRollback(t *testing.T) {
	s, st := applyService(t)
	ctx, _ := as(t, authz.Admin)
	var revs []int64
	for _, w := range []int{100, 200} {
		r, err := s.ApplyTopology(ctx, &pb.ApplyTopologyRequest{Document: yamlDoc(t, fixture.Weighted(t, w))})
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, r.GetRevision())
	}
	h, err := s.History(ctx, &pb.HistoryRequest{})
	if err != nil || h.GetCurrent() != revs[1] || len(h.GetEntries()) != 2 {
		t.Fatalf("history: %v, %v", h, err)
	}
	if e := h.GetEntries()[0]; e.GetRevision() != revs[1] || e.GetIdentity() != "admin-1" || e.GetNote() != "apply: 1 server changed" || !e.GetKept() || e.GetSummary().GetServers() != 6 {
		t.Errorf("newest entry: %v", e)
	}

	d, err := s.DiffTopology(ctx, &pb.DiffTopologyRequest{FromRevision: revs[0]})
	if err != nil || d.GetToRevision() != revs[1] {
		t.Fatalf("diff: %v, %v", d, err)
	}
	if ch := section(d.GetDiff(), "servers").GetChanged(); len(ch) != 1 || ch[0].GetFields()[0] != "weight: 100 -> 200" {
		t.Errorf("diff %v", d.GetDiff())
	}
	if _, err := s.DiffTopology(ctx, &pb.DiffTopologyRequest{FromRevision: 99999}); status.Code(err) != codes.NotFound {
		t.Errorf("diff from an unknown revision: %v", err)
	}
	d, err = s.DiffTopology(ctx, &pb.DiffTopologyRequest{Document: yamlDoc(t, fixture.Weighted(t, 300))})
	if err != nil || d.GetFromRevision() != revs[1] || section(d.GetDiff(), "servers").GetChanged()[0].GetFields()[0] != "weight: 200 -> 300" {
		t.Errorf("diff with a document: %v, %v", d, err)
	}

	if _, err := s.Rollback(ctx, &pb.RollbackRequest{Revision: revs[0], BaseRevision: revs[0], Force: true}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("rollback on a stale base: %v", err)
	}
	dry, err := s.Rollback(ctx, &pb.RollbackRequest{Revision: revs[0], BaseRevision: revs[1], DryRun: true})
	if err != nil || dry.GetApplied() || !dry.GetChanged() || dry.GetRevision() != revs[1] {
		t.Fatalf("rollback dry run: %v, %v", dry, err)
	}
	rctx, rnote := as(t, authz.Admin)
	rb, err := s.Rollback(rctx, &pb.RollbackRequest{Revision: revs[0], BaseRevision: revs[1]})
	if err != nil || !rb.GetApplied() || rb.GetRevision() <= revs[1] {
		t.Fatalf("rollback: %v, %v", rb, err)
	}
	if rnote.Target != "topology" || rnote.Detail != "rollback to "+itoa(revs[0])+": 1 server changed" || rnote.Revision != rb.GetRevision() {
		t.Errorf("audit note %+v", rnote)
	}
	cur, _ := st.Current(ctx)
	if cur.Topology.Nodes[0].Servers[0].Weight != 100 || cur.Revision != rb.GetRevision() || cur.KeyID != s.Apply.Signer.KeyID() {
		t.Errorf("after rollback: revision %d weight %d key %q", cur.Revision, cur.Topology.Nodes[0].Servers[0].Weight, cur.KeyID)
	}
	h, _ = s.History(ctx, &pb.HistoryRequest{Limit: 1})
	if len(h.GetEntries()) != 1 || h.GetEntries()[0].GetNote() != "rollback to "+itoa(revs[0])+": 1 server changed" {
		t.Errorf("history after rollback: %v", h)
	}
	if _, err := s.Rollback(ctx, &pb.RollbackRequest{Revision: 99999}); status.Code(err) != codes.NotFound {
		t.Errorf("rollback to an unknown revision: %v", err)
	}
}

// A rollback that would empty the province is guarded like an apply.
func TestRollbackGuarded(t *testing.T) {
	s, _ := applyService(t)
	ctx, _ := as(t, authz.Admin)
	small := fixture.Province(t, fixture.Cities(1)...)
	r1, err := s.ApplyTopology(ctx, &pb.ApplyTopologyRequest{Document: yamlDoc(t, small)})
	if err != nil {
		t.Fatal(err)
	}
	big := fixture.Province(t, fixture.Cities(4)...)
	if _, err := s.ApplyTopology(ctx, &pb.ApplyTopologyRequest{Document: yamlDoc(t, big)}); err != nil {
		t.Fatal(err)
	}
	octx, _ := as(t, authz.Operator)
	if _, err := s.Rollback(octx, &pb.RollbackRequest{Revision: r1.GetRevision()}); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "removes 6 of 8 servers") {
		t.Fatalf("rollback removing 6 of 8 servers: %v", err)
	}
	if _, err := s.Rollback(octx, &pb.RollbackRequest{Revision: r1.GetRevision(), Force: true}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("forced rollback by an operator: %v", err)
	}
	if r, err := s.Rollback(ctx, &pb.RollbackRequest{Revision: r1.GetRevision(), Force: true}); err != nil || !r.GetApplied() {
		t.Fatalf("forced rollback by an admin: %v, %v", r, err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
