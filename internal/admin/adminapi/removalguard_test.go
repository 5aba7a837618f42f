package adminapi

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
)

// guardService is forecastProvince (hefei: a and b on node hefei-1, c on
// hefei-2; wuhu: w) behind a real etcd, with drains in force as given.
func guardService(t *testing.T, share float64, drains []opstate.Drain, balance string) *Service {
	t.Helper()
	st := etcdtest.Start(t).Store()
	if balance != "" { // the stored balance policy
		if _, err := opstate.SetBalance(t.Context(), st.Client(), st.Prefix(), nil, []byte(balance), 0); err != nil {
			t.Fatal(err)
		}
	}
	eng := steer.New(fixture.CompileYAML(t, forecastProvince, 1), steer.Options{})
	return &Service{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Engine: func() *steer.Engine { return eng },
		Drains: func() []opstate.Drain { return drains }, Apply: ApplyPolicy{MaxRemovalShare: share}}
}

// TestDrainRemovalGuard: a drain that would leave a region with no serving
// server, or put more than apply.max_removal_share of the province's
// servers out of service (the drains in force and the balance policy's
// zero weights counted), is refused with FailedPrecondition naming what it
// removes; --force passes it for an admin only. A dry run answers with
// what the guard would say.
func TestDrainRemovalGuard(t *testing.T) {
	tests := []struct {
		name       string
		share      float64
		inForce    []opstate.Drain
		balance    string // the stored balance policy
		kind, what string
		role       authz.Role
		force      bool
		dryRun     bool
		code       codes.Code
		says       []string
	}{
		{name: "a server, hefei keeps two", share: 0.5, kind: "server", what: "a", role: authz.Operator, code: codes.OK},
		{name: "a node, hefei keeps c", share: 0.5, kind: "node", what: "hefei-1", role: authz.Operator, code: codes.OK},
		{name: "a region", share: 0.5, kind: "region", what: "hefei", role: authz.Operator, code: codes.FailedPrecondition,
			says: []string{"refused: draining region hefei", "takes 3 servers out of service: a, b, c", "leaves region hefei with no serving server", "--force as admin"}},
		{name: "a region, dry run: answered, with the refusal", share: 0.5, kind: "region", what: "hefei", role: authz.Operator, dryRun: true, code: codes.OK,
			says: []string{"refused: draining region hefei", "leaves region hefei with no serving server"}},
		{name: "a region, dry run forced by an operator", share: 0.5, kind: "region", what: "hefei", role: authz.Operator, dryRun: true, force: true, code: codes.OK,
			says: []string{"needs the admin role"}},
		{name: "a server, dry run: nothing refused", share: 0.5, kind: "server", what: "a", role: authz.Operator, dryRun: true, code: codes.OK},
		{name: "a region's only server", share: 0.5, kind: "server", what: "w", role: authz.Operator, code: codes.FailedPrecondition,
			says: []string{"takes 1 server out of service: w", "leaves region wuhu with no serving server"}},
		{name: "the last server of a region, the rest drained", share: 0.9, inForce: []opstate.Drain{{Kind: opstate.DrainNode, Name: "hefei-1"}},
			kind: "server", what: "c", role: authz.Operator, code: codes.FailedPrecondition, says: []string{"leaves region hefei with no serving server"}},
		{name: "the last server of a region, the rest weighted 0", share: 0.9, balance: "weights: {a: 0, b: 0}\n",
			kind: "node", what: "hefei-2", role: authz.Operator, code: codes.FailedPrecondition, says: []string{"leaves region hefei with no serving server"}},
		{name: "past the share, counting the drains in force", share: 0.3, inForce: []opstate.Drain{{Kind: opstate.DrainServer, Name: "a"}},
			kind: "server", what: "c", role: authz.Operator, code: codes.FailedPrecondition,
			says: []string{"leaves 2 of 4 servers out of service (50% > 30%, apply.max_removal_share)"}},
		{name: "past the default share", kind: "server", what: "a", role: authz.Operator, code: codes.FailedPrecondition,
			says: []string{"1 of 4 servers out of service (25% > 20%"}},
		{name: "forced by an operator", share: 0.5, kind: "region", what: "hefei", role: authz.Operator, force: true, code: codes.PermissionDenied,
			says: []string{"forcing", "needs the admin role", "operator-1 has operator"}},
		{name: "forced by an admin", share: 0.5, kind: "region", what: "hefei", role: authz.Admin, force: true, code: codes.OK},
		{name: "already drained: nothing more out of service", share: 0.1, inForce: []opstate.Drain{{Kind: opstate.DrainRegion, Name: "wuhu"}},
			kind: "server", what: "w", role: authz.Operator, code: codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := guardService(t, tt.share, tt.inForce, tt.balance)
			ctx, _ := as(t, tt.role)
			before := etcdRevision(t, s.Store)
			resp, err := s.Drain(ctx, &pb.DrainRequest{Kind: tt.kind, Name: tt.what, Reason: "test", Force: tt.force, DryRun: tt.dryRun})
			if tt.code == codes.OK {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if resp.GetServers() == 0 {
					t.Errorf("answer %v", resp)
				}
				for _, w := range tt.says {
					if !strings.Contains(resp.GetRefused(), w) {
						t.Errorf("the dry run's refused %q does not say %q", resp.GetRefused(), w)
					}
				}
				if len(tt.says) == 0 && resp.GetRefused() != "" {
					t.Errorf("refused %q, want nothing", resp.GetRefused())
				}
				if tt.dryRun {
					if after := etcdRevision(t, s.Store); after != before {
						t.Errorf("a dry run wrote to etcd: revision %d -> %d", before, after)
					}
				}
				return
			}
			wantCode(t, "drain", err, tt.code, tt.says...)
			if after := etcdRevision(t, s.Store); after != before {
				t.Errorf("a refused drain wrote to etcd: revision %d -> %d", before, after)
			}
		})
	}
}

// TestBalanceRemovalGuard: a balance policy whose zero weights would leave
// a region with no serving server, or put more than
// apply.max_removal_share of the province's servers out of service (the
// drains in force counted), is refused with FailedPrecondition naming the
// servers, dry run too; --force passes it for an admin only; a policy that
// takes nothing more out of service passes.
func TestBalanceRemovalGuard(t *testing.T) {
	tests := []struct {
		name    string
		share   float64
		inForce []opstate.Drain
		stored  string
		doc     string
		role    authz.Role
		force   bool
		dryRun  bool
		code    codes.Code
		says    []string
	}{
		{name: "one server weighted 0", share: 0.5, doc: "weights: {a: 0}\n", role: authz.Operator, code: codes.OK},
		{name: "favouring a server", share: 0.1, doc: "weights: {a: 50}\n", role: authz.Operator, code: codes.OK},
		{name: "a region's only server", share: 0.5, doc: "weights: {w: 0}\n", role: authz.Operator, code: codes.FailedPrecondition,
			says: []string{"refused: the balance policy", "takes 1 server out of service: w", "leaves region wuhu with no serving server", "--force as admin"}},
		{name: "a region's only server, dry run", share: 0.5, doc: "weights: {w: 0}\n", role: authz.Operator, dryRun: true, code: codes.FailedPrecondition,
			says: []string{"leaves region wuhu with no serving server"}},
		{name: "every server of a region", share: 0.9, doc: "weights: {a: 0, b: 0, c: 0}\n", role: authz.Operator, code: codes.FailedPrecondition,
			says: []string{"takes 3 servers out of service: a, b, c", "leaves region hefei with no serving server"}},
		{name: "the last server, the rest drained", share: 0.9, inForce: []opstate.Drain{{Kind: opstate.DrainNode, Name: "hefei-1"}},
			doc: "weights: {c: 0}\n", role: authz.Operator, code: codes.FailedPrecondition, says: []string{"leaves region hefei with no serving server"}},
		{name: "past the share, counting the drains in force", share: 0.3, inForce: []opstate.Drain{{Kind: opstate.DrainServer, Name: "a"}},
			doc: "weights: {b: 0}\n", role: authz.Operator, code: codes.FailedPrecondition,
			says: []string{"leaves 2 of 4 servers out of service (50% > 30%, apply.max_removal_share)"}},
		{name: "forced by an operator", share: 0.5, doc: "weights: {w: 0}\n", role: authz.Operator, force: true, code: codes.PermissionDenied,
			says: []string{"needs the admin role"}},
		{name: "forced by an admin", share: 0.5, doc: "weights: {w: 0}\n", role: authz.Admin, force: true, code: codes.OK},
		{name: "already weighted 0: nothing more out of service", share: 0.1, stored: "weights: {w: 0}\n", doc: "weights: {w: 0}\nchash: {epsilon: 0.5}\n",
			role: authz.Operator, code: codes.OK},
		{name: "back in service", share: 0.1, stored: "weights: {w: 0}\n", doc: "", role: authz.Operator, code: codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := guardService(t, tt.share, tt.inForce, tt.stored)
			ctx, _ := as(t, tt.role)
			before := etcdRevision(t, s.Store)
			_, err := s.SetBalance(ctx, &pb.SetBalanceRequest{Document: []byte(tt.doc), Force: tt.force, DryRun: tt.dryRun})
			if tt.code == codes.OK {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantCode(t, "balance set", err, tt.code, tt.says...)
			if after := etcdRevision(t, s.Store); after != before {
				t.Errorf("a refused policy was stored: revision %d -> %d", before, after)
			}
			if err != nil && strings.Contains(err.Error(), "a, b, c, w") {
				t.Errorf("the refusal names servers it does not remove: %v", err)
			}
		})
	}
}
