package adminapi

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/audit"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/anysched/anysched/internal/testbed/wait"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// windowService is forecastProvince (hefei: a, b on hefei-1, c on
// hefei-2; wuhu: w) behind a real etcd, its drains read back by a watcher
// as the center's, with an audit trail.
func windowService(t *testing.T, share float64) (*Service, *opstate.Watcher) {
	t.Helper()
	st := etcdtest.Start(t).Store()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := &opstate.Watcher{Client: st.Client(), Prefix: st.Prefix(), Logger: quiet}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	wait.For(t, "first listing", wait.DefaultTimeout, w.Synced)
	eng := steer.New(fixture.CompileYAML(t, forecastProvince, 1), steer.Options{})
	trail := audit.New(st.Client(), st.Prefix(), audit.Options{Keep: 100, MaxAge: time.Hour}, prometheus.NewRegistry(), quiet)
	return &Service{Store: st, Logger: quiet, Engine: func() *steer.Engine { return eng }, Drains: w.Drains, Trail: trail, ID: "center-1",
		Apply: ApplyPolicy{MaxRemovalShare: share}}, w
}

func at(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

// TestDrainWindowChecked: a window is refused at the request when its end
// is not in the future or not after its start, when its start is past, and
// when it is longer than a week unless an admin forces it; each error
// names the field.
func TestDrainWindowChecked(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name        string
		from, until time.Time
		role        authz.Role
		force       bool
		code        codes.Code
		says        string
	}{
		{name: "until past", until: now.Add(-time.Minute), role: authz.Operator, code: codes.InvalidArgument, says: "until: "},
		{name: "until before from", from: now.Add(2 * time.Hour), until: now.Add(time.Hour), role: authz.Operator, code: codes.InvalidArgument, says: "is not after from"},
		{name: "from past", from: now.Add(-time.Hour), until: now.Add(time.Hour), role: authz.Operator, code: codes.InvalidArgument, says: "from: "},
		{name: "eight days", until: now.Add(8 * 24 * time.Hour), role: authz.Operator, code: codes.FailedPrecondition, says: "longer than 168h0m0s"},
		{name: "eight days forced by an operator", until: now.Add(8 * 24 * time.Hour), role: authz.Operator, force: true, code: codes.PermissionDenied, says: "needs the admin role"},
		{name: "eight days forced by an admin", until: now.Add(8 * 24 * time.Hour), role: authz.Admin, force: true, code: codes.OK},
		{name: "until alone", until: now.Add(time.Hour), role: authz.Operator, code: codes.OK},
		{name: "from alone: until undrained", from: now.Add(time.Hour), role: authz.Operator, code: codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := windowService(t, 0.9)
			ctx, _ := as(t, tt.role)
			req := &pb.DrainRequest{Kind: "server", Name: "a", Force: tt.force}
			if !tt.from.IsZero() {
				req.From = at(tt.from)
			}
			if !tt.until.IsZero() {
				req.Until = at(tt.until)
			}
			before := etcdRevision(t, s.Store)
			resp, err := s.Drain(ctx, req)
			if tt.code != codes.OK {
				wantCode(t, "drain", err, tt.code, tt.says)
				if after := etcdRevision(t, s.Store); after != before {
					t.Errorf("a refused drain wrote to etcd: revision %d -> %d", before, after)
				}
				return
			}
			if err != nil || !resp.GetChanged() {
				t.Fatalf("drain: %v, %v", resp, err)
			}
			if !tt.until.IsZero() && !resp.GetUntil().AsTime().Equal(tt.until) {
				t.Errorf("until stored %v, want %v", resp.GetUntil().AsTime(), tt.until)
			}
		})
	}
}

// TestDrainWindowGuard: the removal guard judges a scheduled drain against
// the drains whose windows overlap it, at the moment the overlap begins:
// node hefei-1 drained from +1h to +3h, server c (hefei's last) may be
// drained before or after that, not across it; and a drain without a
// window over the same target is refused, not replaced.
func TestDrainWindowGuard(t *testing.T) {
	s, w := windowService(t, 0.9)
	now := time.Now().Truncate(time.Second)
	ctx, _ := as(t, authz.Operator)
	if _, err := s.Drain(ctx, &pb.DrainRequest{Kind: "node", Name: "hefei-1", From: at(now.Add(time.Hour)), Until: at(now.Add(3 * time.Hour))}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the scheduled drain read back", wait.DefaultTimeout, func() bool { return len(w.Drains()) == 1 })
	for _, c := range []struct {
		from, until time.Duration
		refused     string
	}{
		{0, 30 * time.Minute, ""},
		{3 * time.Hour, 4 * time.Hour, ""},
		{2 * time.Hour, 4 * time.Hour, "from " + now.Add(2*time.Hour).UTC().Format(time.RFC3339)},
		{0, 2 * time.Hour, "from " + now.Add(time.Hour).UTC().Format(time.RFC3339)},
	} {
		req := &pb.DrainRequest{Kind: "server", Name: "c", DryRun: true, Until: at(now.Add(c.until))}
		if c.from > 0 {
			req.From = at(now.Add(c.from))
		}
		ctx, _ := as(t, authz.Operator)
		resp, err := s.Drain(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.GetRefused(); (c.refused == "") != (got == "") || !strings.Contains(got, c.refused) || (got != "" && !strings.Contains(got, "leaves region hefei with no serving server")) {
			t.Errorf("server c from +%s until +%s: refused %q, want %q", c.from, c.until, got, c.refused)
		}
	}
	ctx, _ = as(t, authz.Operator)
	_, err := s.Drain(ctx, &pb.DrainRequest{Kind: "node", Name: "hefei-1", Reason: "now"})
	wantCode(t, "drain over a scheduled one", err, codes.FailedPrecondition, "has a scheduled drain")
}

// TestEndDrainsAudited: the center's housekeeping deletes a drain whose
// window ended and audits it "ended by its window"; a pending one stays.
func TestEndDrainsAudited(t *testing.T) {
	s, w := windowService(t, 0.9)
	ctx := context.Background()
	now := time.Now().UTC()
	cli, prefix := s.Store.Client(), s.Store.Prefix()
	if err := opstate.SetDrain(ctx, cli, prefix, nil, opstate.Drain{Kind: opstate.DrainServer, Name: "a", Reason: "firmware", From: now.Add(-2 * time.Hour), Until: now.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := opstate.SetDrain(ctx, cli, prefix, nil, opstate.Drain{Kind: opstate.DrainServer, Name: "b", From: now.Add(time.Hour), Until: now.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "both drains read", wait.DefaultTimeout, func() bool { return len(w.Drains()) == 2 })
	if n, err := s.EndDrains(ctx, time.Now()); n != 1 || err != nil {
		t.Fatalf("EndDrains: %d, %v; want 1 ended", n, err)
	}
	resp, err := cli.Get(ctx, prefix+keyspace.PrefixDrain, clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 || !strings.HasSuffix(string(resp.Kvs[0].Key), "/b") {
		t.Fatalf("drains left %v (%v), want b's alone", resp.Kvs, err)
	}
	recs, err := s.Trail.List(ctx, 10, time.Time{})
	if err != nil || len(recs) != 1 {
		t.Fatalf("audit records %+v, %v; want one", recs, err)
	}
	if r := recs[0]; r.Method != HousekeepingMethod || r.Target != "server/a" || !strings.Contains(r.Detail, "ended by its window") || !strings.Contains(r.Detail, "firmware") {
		t.Errorf("audit record %+v", r)
	}
}

// TestMaintenanceSchedulesAndCancels: a city's maintenance window writes
// the region's drain (forced: emptying the city is the point) and a
// maintenance drill of the region, both with the window; asking again
// changes nothing; a dry run writes nothing; list shows it; cancel
// removes both.
func TestMaintenanceSchedulesAndCancels(t *testing.T) {
	s, w := windowService(t, 0.9)
	now := time.Now().Truncate(time.Second).UTC()
	from, until := now.Add(time.Hour), now.Add(5*time.Hour)
	req := &pb.MaintenanceRequest{Region: "hefei", From: at(from), Until: at(until), Reason: "power work", DryRun: true}
	ctx, _ := as(t, authz.Admin)
	before := etcdRevision(t, s.Store)
	resp, err := s.Maintenance(ctx, req)
	if err != nil || resp.GetServers() != 3 || resp.GetRefused() != "" {
		t.Fatalf("dry run: %v, %v", resp, err)
	}
	if after := etcdRevision(t, s.Store); after != before {
		t.Errorf("a dry run wrote to etcd: revision %d -> %d", before, after)
	}
	req.DryRun = false
	ctx, _ = as(t, authz.Admin)
	if resp, err = s.Maintenance(ctx, req); err != nil || !resp.GetChanged() {
		t.Fatalf("maintenance: %v, %v", resp, err)
	}
	wait.For(t, "the region's drain read back", wait.DefaultTimeout, func() bool { return len(w.Drains()) == 1 })
	d := w.Drains()[0]
	if d.Kind != opstate.DrainRegion || d.Name != "hefei" || !d.Forced || !d.From.Equal(from) || !d.Until.Equal(until) || d.Reason != "maintenance: power work" {
		t.Errorf("region drain %+v", d)
	}
	drills, _, err := opstate.ListDrills(context.Background(), s.Store.Client(), s.Store.Prefix())
	if err != nil || len(drills) != 1 || !drills[0].Maintenance || drills[0].Target != opstate.RegionTarget("hefei") || !drills[0].Started.Equal(from) || !drills[0].Until.Equal(until) {
		t.Fatalf("drills %+v, %v: want hefei's maintenance drill with the window", drills, err)
	}
	ctx, _ = as(t, authz.Admin)
	if resp, err = s.Maintenance(ctx, req); err != nil || resp.GetChanged() {
		t.Errorf("the same window again: %v, %v; want unchanged", resp, err)
	}
	ctx, _ = as(t, authz.Viewer)
	list, err := s.ListMaintenance(ctx, &pb.ListMaintenanceRequest{})
	if err != nil || len(list.GetWindows()) != 1 {
		t.Fatalf("list: %v, %v", list, err)
	}
	if mw := list.GetWindows()[0]; mw.GetRegion() != "hefei" || mw.GetState() != "pending" || !mw.GetDrained() || !mw.GetWithdrawn() || !mw.GetFrom().AsTime().Equal(from) {
		t.Errorf("window listed %v", mw)
	}
	ctx, note := as(t, authz.Operator)
	if resp, err = s.CancelMaintenance(ctx, &pb.CancelMaintenanceRequest{Region: "hefei"}); err != nil || !resp.GetChanged() {
		t.Fatalf("cancel: %v, %v", resp, err)
	}
	if !strings.Contains(note.Detail, "cancelled the maintenance window") {
		t.Errorf("the cancel's audit detail %q", note.Detail)
	}
	wait.For(t, "the region's drain gone", wait.DefaultTimeout, func() bool { return len(w.Drains()) == 0 })
	if drills, _, err := opstate.ListDrills(context.Background(), s.Store.Client(), s.Store.Prefix()); err != nil || len(drills) != 0 {
		t.Errorf("drills after the cancel %+v, %v", drills, err)
	}
	ctx, _ = as(t, authz.Operator)
	if resp, err = s.CancelMaintenance(ctx, &pb.CancelMaintenanceRequest{Region: "hefei"}); err != nil || resp.GetChanged() {
		t.Errorf("cancelling again: %v, %v; want unchanged", resp, err)
	}
}

// TestMaintenanceNeedsAnEnd: a window without until, or longer than a
// week (which no force passes: every scheduler ends a maintenance drill by
// then), is refused naming the field.
func TestMaintenanceNeedsAnEnd(t *testing.T) {
	s, _ := windowService(t, 0.9)
	ctx, _ := as(t, authz.Admin)
	_, err := s.Maintenance(ctx, &pb.MaintenanceRequest{Region: "hefei"})
	wantCode(t, "maintenance without until", err, codes.InvalidArgument, "until: required")
	ctx, _ = as(t, authz.Admin)
	_, err = s.Maintenance(ctx, &pb.MaintenanceRequest{Region: "hefei", Until: at(time.Now().Add(8 * 24 * time.Hour)), Force: true})
	wantCode(t, "maintenance of eight days", err, codes.FailedPrecondition, "longer than")
	if p := methodRuleNeed(t, pb.Admin_Maintenance_FullMethodName); p != authz.Admin {
		t.Errorf("Maintenance needs %s, want admin", p)
	}
}

func methodRuleNeed(t *testing.T, method string) authz.Role {
	t.Helper()
	r, ok := methodRule(method)
	if !ok {
		t.Fatalf("%s is not in the role table", method)
	}
	return r.need
}
