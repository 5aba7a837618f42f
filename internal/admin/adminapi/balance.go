package adminapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/audit"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/stb/balance"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// balanceTarget is how balance policy changes are named in the audit trail.
const balanceTarget = keyspace.KeyBalance

// GetBalance returns the stored balance policy document, the policy in
// force with every default filled in, and the servers the center's engine
// weighs differently from the topology.
func (s *Service) GetBalance(ctx context.Context, _ *pb.GetBalanceRequest) (*pb.BalanceResponse, error) {
	st, err := opstate.ReadBalance(ctx, s.Store.Client(), s.Store.Prefix())
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	cfg, perr := parseBalance(st.Document)
	resp := &pb.BalanceResponse{Document: st.Document, Revision: st.Revision, Weights: s.serverWeights()}
	if perr != nil {
		// What every scheduler does with it: the defaults are in force.
		resp.Invalid, cfg = perr.Error(), balance.DefaultConfig()
	}
	if resp.Effective, err = cfg.Effective().YAML(); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return resp, nil
}

// SetBalance validates a balance policy document and, unless dry_run,
// stores it, guarded by the revision it was read at: a document someone
// changed meanwhile is not overwritten unseen.
func (s *Service) SetBalance(ctx context.Context, req *pb.SetBalanceRequest) (*pb.BalanceResponse, error) {
	audit.Annotate(ctx, func(n *audit.Note) { n.Target = balanceTarget })
	doc := req.GetDocument()
	if len(bytes.TrimSpace(doc)) == 0 {
		doc = nil // blank: no document, the defaults
	}
	// Every problem at once: the document's and its server names'.
	cfg, err := parseBalancePartial(doc)
	if err := joinProblems(err, s.checkBalanceServers(cfg)); err != nil {
		return nil, balanceInvalid(err)
	}
	st, err := opstate.ReadBalance(ctx, s.Store.Client(), s.Store.Prefix())
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	if b := req.GetBaseRevision(); b != 0 && max(b, 0) != st.Revision {
		read := fmt.Sprintf("at revision %d", b)
		if b < 0 {
			read = "when none was stored"
		}
		now := fmt.Sprintf("the stored one is at revision %d", st.Revision)
		if st.Revision == 0 {
			now = "none is stored now"
		}
		return nil, status.Errorf(codes.FailedPrecondition, "the balance policy was read %s but %s: someone changed it meanwhile; read it again (schedctl balance get)", read, now)
	}
	old, oerr := parseBalance(st.Document)
	if oerr != nil {
		old = balance.DefaultConfig()
	}
	diff := balance.Diff(old.Effective(), cfg.Effective())
	forced, err := s.guardBalance(ctx, old, cfg, req.GetForce())
	if err != nil {
		return nil, err
	}
	resp := &pb.BalanceResponse{Document: doc, Revision: st.Revision, Changed: !bytes.Equal(doc, st.Document)}
	if resp.Effective, err = cfg.Effective().YAML(); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if req.GetDryRun() || !resp.Changed {
		resp.Weights = s.serverWeights()
		// The trail says a dry run or an unchanged document was no
		// change, as drains and rollbacks do.
		detail := "unchanged: the center already holds this document"
		if req.GetDryRun() {
			detail = "dry run: " + balanceDetail(doc, diff)
		}
		audit.Annotate(ctx, func(n *audit.Note) { n.Detail = detail })
		return resp, nil
	}
	rev, err := opstate.SetBalance(ctx, s.Store.Client(), s.Store.Prefix(), s.Apply.Signer, doc, st.Revision)
	if errors.Is(err, opstate.ErrBalanceChanged) {
		return nil, status.Error(codes.FailedPrecondition, "the balance policy changed while this one was being stored; read it again (schedctl balance get)")
	}
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	resp.Revision = rev
	detail := balanceDetail(doc, diff)
	if forced != "" {
		detail += "; forced past the removal guard: " + forced
		s.Logger.Warn("balance policy forced past the removal guard", "what", forced)
	}
	audit.Annotate(ctx, func(n *audit.Note) { n.Detail = detail })
	s.Logger.Info("balance policy stored", "revision", rev, "change", detail)
	return resp, nil
}

// guardBalance refuses, unless forced by an admin, a policy whose zero
// weights take servers out of service past the removal guard
// (removalguard.go), the drains in force counted; it returns what a forced
// one takes out. Without a snapshot there is nothing to weigh the policy
// against (nor are its server names checked).
func (s *Service) guardBalance(ctx context.Context, old, next balance.Config, force bool) (string, error) {
	eng := s.engine()
	if eng == nil {
		return "", nil
	}
	snap := eng.Snapshot()
	ds := notEnded(s.drains(), time.Now()) // a pending drain will be in force, with the policy
	return s.guardRemoval(ctx, "the balance policy", snap, inService(snap, ds, old.Weights), inService(snap, ds, next.Weights), force, "balance set", "")
}

// weightsInForce is the stored balance policy's weights as the schedulers
// take them (an invalid document: the defaults, none).
func (s *Service) weightsInForce(ctx context.Context) (map[string]float64, error) {
	st, err := opstate.ReadBalance(ctx, s.Store.Client(), s.Store.Prefix())
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	cfg, err := parseBalance(st.Document)
	if err != nil {
		return nil, nil
	}
	return cfg.Weights, nil
}

// parseBalance is the policy a document stands for: none is the defaults.
func parseBalance(doc []byte) (balance.Config, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return balance.DefaultConfig(), nil
	}
	return balance.ParseConfig(doc)
}

// parseBalancePartial is parseBalance with every problem and the policy as
// far as it decoded (balance.ParseConfigPartial).
func parseBalancePartial(doc []byte) (balance.Config, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return balance.DefaultConfig(), nil
	}
	return balance.ParseConfigPartial(doc)
}

// joinProblems is the field problems of a and b as one list (either may
// be nil); an error that is not a list of field problems wins alone.
func joinProblems(a, b error) error {
	var all yamlstrict.Errors
	for _, err := range []error{a, b} {
		if err == nil {
			continue
		}
		fes, ok := yamlstrict.AsErrors(err)
		if !ok {
			return err
		}
		all = append(all, fes...)
	}
	return all.Err()
}

// checkBalanceServers refuses weights for servers the topology does not
// have: a misspelt name would otherwise override nothing, silently.
func (s *Service) checkBalanceServers(cfg balance.Config) error {
	eng := s.engine()
	if eng == nil || len(cfg.Weights) == 0 {
		return nil
	}
	snap := eng.Snapshot()
	var errs yamlstrict.Errors
	for _, name := range slices.Sorted(maps.Keys(cfg.Weights)) {
		if _, ok := snap.Server(name); !ok {
			errs.Add("weights."+name, "no server named %q in topology revision %d", name, snap.Revision)
		}
	}
	return errs.Err()
}

func (s *Service) engine() *steer.Engine {
	if s.Engine == nil {
		return nil
	}
	return s.Engine()
}

// serverWeights is what the center's engine weighs differently from the
// topology (nil before a snapshot).
func (s *Service) serverWeights() []*pb.ServerWeight {
	eng := s.engine()
	if eng == nil {
		return nil
	}
	snap := eng.Snapshot()
	var out []*pb.ServerWeight
	for _, w := range eng.Weights() {
		out = append(out, &pb.ServerWeight{Server: snap.Servers[w.Server].Name, Topology: int32(w.Topology), Effective: w.Effective, Why: w.Why})
	}
	return out
}

// balanceDetail is the audit record's one line: what changed.
func balanceDetail(doc []byte, diff []string) string {
	head := "set"
	if doc == nil {
		head = "reset to the defaults"
	}
	switch {
	case len(diff) == 0:
		return head + ": the effective policy is unchanged"
	case len(diff) > 5:
		diff = append(diff[:5:5], fmt.Sprintf("and %d more", len(diff)-5))
	}
	return head + ": " + strings.Join(diff, "; ")
}

// balanceInvalid is a rejected policy document as INVALID_ARGUMENT, one
// field violation per problem.
func balanceInvalid(err error) error {
	fes, ok := yamlstrict.AsErrors(err)
	if !ok {
		return status.Errorf(codes.InvalidArgument, "balance policy rejected, nothing was stored: %v", err)
	}
	br := &errdetails.BadRequest{}
	for _, fe := range fes[:min(len(fes), maxViolations)] {
		desc := fe.Msg
		if fe.Line > 0 {
			desc = fmt.Sprintf("%s (line %d)", fe.Msg, fe.Line)
		}
		br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: fe.Path, Description: desc})
	}
	st, derr := status.New(codes.InvalidArgument, fmt.Sprintf("balance policy rejected: %d problem(s), nothing was stored", len(fes))).WithDetails(br)
	if derr != nil {
		return status.Errorf(codes.InvalidArgument, "balance policy rejected, nothing was stored: %v", err)
	}
	return st.Err()
}
