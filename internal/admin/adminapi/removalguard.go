package adminapi

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/topology"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Operators past the guard: a topology apply that
// removes too many servers needs --force as admin (apply.go), and so does
// every other change that takes servers out of service, drains and
// balance policies with zero weights: else an operator could empty a
// region, or the province, by a drain where an apply would be refused.

// forcePast is the removal guard's verdict on a change whose dangers are
// what: refused (by refusal) unless forced, and forcing needs the admin role.
func forcePast(ctx context.Context, what string, force bool, refusal func() error) error {
	caller, _ := authz.FromContext(ctx)
	switch {
	case !force:
		return refusal()
	case caller.Role < authz.Admin:
		return status.Errorf(codes.PermissionDenied, "forcing a change that %s needs the admin role (%s has %s)", what, orNobody(caller.Identity), caller.Role)
	}
	return nil
}

// inService is, per server of snap, whether it serves with the drains ds
// in force and the balance policy's weights (a weight, the policy's or the
// topology's, of 0 takes a server out as a drain does).
func inService(snap *topology.Snapshot, ds []opstate.Drain, weights map[string]float64) []bool {
	out := make([]bool, len(snap.Servers))
	for i, sv := range snap.Servers {
		w := float64(sv.Weight)
		if o, ok := weights[sv.Name]; ok {
			w = o
		}
		out[i] = w > 0
	}
	for _, d := range ds {
		for _, si := range drained(snap, d) {
			out[si] = false
		}
	}
	return out
}

// drained is the servers a drain covers (none when its target is not in
// snap).
func drained(snap *topology.Snapshot, d opstate.Drain) []int32 {
	switch d.Kind {
	case opstate.DrainServer:
		if i, ok := snap.Server(d.Name); ok {
			return []int32{i}
		}
	case opstate.DrainNode:
		if i, ok := snap.Node(d.Name); ok {
			return snap.Nodes[i].Servers
		}
	case opstate.DrainRegion:
		if i, ok := snap.Region(d.Name); ok {
			return snap.Regions[i].Servers
		}
	}
	return nil
}

// removalDangers says what going from the servers in service before to
// those after takes out ("" when nothing) and why the guard refuses it
// (nil: it does not): a region left with no serving server, or more than
// share of the province's servers out of service afterwards, counting
// those already out (drains in force, zero weights), so that a province
// cannot be emptied a little at a time. Region emptied ("" for none) is
// one the change is meant to empty (a city's maintenance window).
func removalDangers(snap *topology.Snapshot, before, after []bool, share float64, emptied string) (removed string, dangers []string) {
	var names []string
	out := 0
	for i := range before {
		if before[i] && !after[i] {
			names = append(names, snap.Servers[i].Name)
		}
		if !after[i] {
			out++
		}
	}
	if len(names) == 0 {
		return "", nil
	}
	const shown = 10
	list := strings.Join(names[:min(len(names), shown)], ", ")
	if len(names) > shown {
		list += fmt.Sprintf(" and %d more", len(names)-shown)
	}
	removed = fmt.Sprintf("takes %s out of service: %s", count(len(names), "servers"), list)
	for _, r := range snap.Regions {
		had, has := false, false
		for _, si := range r.Servers {
			had = had || before[si]
			has = has || after[si]
		}
		if had && !has && r.Name != emptied {
			dangers = append(dangers, "leaves region "+r.Name+" with no serving server")
		}
	}
	if total := len(snap.Servers); total > 0 {
		if f := float64(out) / float64(total); f > share {
			dangers = append(dangers, fmt.Sprintf("leaves %d of %d servers out of service (%s > %s, apply.max_removal_share)", out, total, percent(f), percent(share)))
		}
	}
	return removed, dangers
}

// guardRemoval refuses, unless forced by an admin, a change (named by
// what, e.g. "draining region hefei") that takes servers out of service
// past the guard; FailedPrecondition names the servers and the dangers.
// A forced change's dangers are returned to be logged. Region emptied
// may be left with no serving server ("" for none).
func (s *Service) guardRemoval(ctx context.Context, what string, snap *topology.Snapshot, before, after []bool, force bool, retry, emptied string) (string, error) {
	removed, dangers := removalDangers(snap, before, after, s.Apply.share(), emptied)
	if len(dangers) == 0 {
		return "", nil
	}
	why := removed + "; " + strings.Join(dangers, "; ")
	err := forcePast(ctx, why, force, func() error {
		return status.Errorf(codes.FailedPrecondition, "refused: %s %s; check, then %s with --force as admin", what, why, retry)
	})
	return why, err
}

func count(n int, plural string) string {
	if n == 1 {
		return "1 " + strings.TrimSuffix(plural, "s")
	}
	return strconv.Itoa(n) + " " + plural
}

// percent is topology's rendering of a share: 0.2 is "20%", 0.2049 "20.5%".
func percent(f float64) string {
	p := f * 100
	if p == float64(int64(p)) {
		return strconv.FormatFloat(p, 'f', 0, 64) + "%"
	}
	return strconv.FormatFloat(p, 'f', 1, 64) + "%"
}
