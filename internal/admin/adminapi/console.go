package adminapi

import (
	"context"
	"log/slog"
	"sort"
	"time"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/province/audit"
	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/opstate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Callers in process (the operator console on the admin listener) go
// through the same role table, log line and audit record as a gRPC call:
// a second table would drift from the first, and a change made in a
// browser must be as accountable as one made with schedctl.

// Authorize is nil when c may call fullMethod by the admin API's role
// table, else a gRPC status error: PermissionDenied (the method is not in
// the table, or the role is short) or Unauthenticated (nobody).
func Authorize(c authz.Caller, fullMethod string) error {
	return (&guard{}).authorize(fullMethod, c)
}

// ReadOnlyMethod reports whether fullMethod is in the role table as a pure
// read (not audited unless refused).
func ReadOnlyMethod(fullMethod string) bool {
	r, ok := methodRule(fullMethod)
	return ok && r.read
}

// Gate runs in-process calls of the admin service as the gRPC server's
// interceptor runs remote ones.
type Gate struct {
	g *guard
}

// NewGate is the gate of a center whose audit trail is trail (nil: calls
// are only logged), logging to log.
func NewGate(trail *audit.Trail, log *slog.Logger) *Gate {
	return &Gate{g: &guard{log: log, trail: trail}}
}

// Call authorizes c for fullMethod, runs do with c in its context (as
// authz.FromContext reads it) and an audit note, then logs the call and,
// unless it is a read that went through, writes its audit record before
// returning do's error.
func (g *Gate) Call(ctx context.Context, c authz.Caller, fullMethod string, do func(ctx context.Context) error) error {
	start := time.Now()
	ctx, note := audit.WithNote(authz.NewContext(ctx, c))
	err := g.g.authorize(fullMethod, c)
	if err == nil {
		err = do(ctx)
	}
	g.g.record(ctx, fullMethod, c, note, err, start)
	return err
}

// ServerState is one server as the engine in service sees it: the
// per-server figures behind Status's per-region health counts.
type ServerState struct {
	Server, Node, Region, Address string
	Address6                      string // a dual-stack server's IPv6 address
	// FamilyDown names the family ("ipv4", "ipv6") of a dual-stack server
	// whose address of it is down while the other works, FamilyWhy why.
	FamilyDown, FamilyWhy string
	Available             bool
	Healthy               bool // health alone, before drains and panic mode
	Measured              bool // a live checker reports on it
	Drained               bool
	PanicNode             bool      // its node is in panic mode: health ignored
	Why                   string    // why it is unavailable: unhealthy, drained, ejected
	Since                 time.Time // when its verdict last changed (zero: unknown)
	RTT                   time.Duration
	Loss                  float64
	Weight                int     // the topology's
	Effective             float64 // the engine's weight when it differs (slow start, adaptive)
	WeightWhy             string
}

// ServerStates lists every server of the engine in service with its
// verdict, reason and weight, by region, node and server order of the
// topology; Unavailable before the first snapshot. It reads what Status
// counts, so callers authorize it as Status.
func (s *Service) ServerStates(_ context.Context) (revision int64, out []ServerState, err error) {
	eng := s.engine()
	var a *avail.Availability
	if s.Health != nil {
		a = s.Health()
	}
	if eng == nil || a == nil {
		return 0, nil, status.Error(codes.Unavailable, "no topology snapshot or health yet")
	}
	snap := eng.Snapshot()
	if len(a.Available) != len(snap.Servers) {
		return 0, nil, status.Error(codes.Unavailable, "health is being rebuilt for a new snapshot; ask again")
	}
	weights := map[int32]int{}
	ws := eng.Weights()
	for i, w := range ws {
		weights[w.Server] = i
	}
	for _, rv := range snap.Regions {
		for _, ni := range rv.Nodes {
			nv := snap.Nodes[ni]
			for _, si := range nv.Servers {
				sv := snap.Servers[si]
				st := ServerState{
					Server: sv.Name, Node: nv.Name, Region: rv.Name, Address: sv.AddrString,
					Available: a.Available[si], Healthy: a.Healthy[si], Measured: a.Figures[si].Measured,
					Drained: a.Drained[si], PanicNode: a.Panic[ni], Why: a.Why[si], Since: a.Figures[si].Since,
					RTT: a.Figures[si].RTT, Loss: a.Figures[si].Loss, Weight: sv.Weight, Effective: float64(sv.Weight),
				}
				if i, ok := weights[si]; ok {
					st.Effective, st.WeightWhy = ws[i].Effective, ws[i].Why
				}
				st.Address6 = sv.Addr6String
				if fd := a.FamilyDown; fd != nil {
					for f, name := range [2]string{"ipv4", "ipv6"} {
						if fd[f][si] {
							st.FamilyDown, st.FamilyWhy = name, a.FamilyWhy[f][si]
						}
					}
				}
				out = append(out, st)
			}
		}
	}
	return snap.Revision, out, nil
}

// Drills lists the failover drills recorded (those just ended linger a few
// seconds), by start time. It reads what the Drill RPC decides on, so
// callers authorize it as Status.
func (s *Service) Drills(ctx context.Context) ([]opstate.Drill, error) {
	drills, _, err := opstate.ListDrills(ctx, s.Store.Client(), s.Store.Prefix())
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	sort.Slice(drills, func(i, j int) bool { return drills[i].Started.Before(drills[j].Started) })
	return drills, nil
}
