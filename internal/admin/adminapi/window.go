package adminapi

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/anysched/anysched/internal/province/audit"
	"github.com/anysched/anysched/internal/province/opstate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Scheduled drains: a drain may carry a window, from (unset: now) until
// until (unset: until undrained). The center checks the window at the
// request, and the removal guard at every moment of it when the set of
// drains in force changes; every scheduler applies the drain only inside
// it, on its own clock (opstate.Watcher); the center's housekeeping
// deletes the drains whose window ended (EndDrains).

// startSlack is how far in the past a window's start may be and still
// mean "now": the operator's clock, and the time the request took.
const startSlack = time.Minute

// windowed is what a request with a window carries.
type windowed interface {
	GetFrom() *timestamppb.Timestamp
	GetUntil() *timestamppb.Timestamp
	GetForce() bool
}

// drainWindow checks req's window at now and returns a drain carrying it
// (From left zero when it starts now): until in the future and after
// from, from not in the past, and the window at most opstate.MaxWindow
// long unless forced by an admin. Errors name the field.
func (s *Service) drainWindow(ctx context.Context, req windowed, now time.Time) (opstate.Drain, error) {
	var d opstate.Drain
	if req.GetFrom() != nil {
		from := req.GetFrom().AsTime()
		if from.Before(now.Add(-startSlack)) {
			return d, status.Errorf(codes.InvalidArgument, "from: %s is in the past; leave it out to start now", from.UTC().Format(time.RFC3339))
		}
		if from.After(now) {
			d.From = from.UTC()
		}
	}
	if req.GetUntil() == nil {
		return d, nil
	}
	until := req.GetUntil().AsTime().UTC()
	start := now
	if !d.From.IsZero() {
		start = d.From
	}
	switch {
	case !until.After(now):
		return d, status.Errorf(codes.InvalidArgument, "until: %s is not in the future", until.Format(time.RFC3339))
	case !until.After(start):
		return d, status.Errorf(codes.InvalidArgument, "until: %s is not after from %s", until.Format(time.RFC3339), start.UTC().Format(time.RFC3339))
	}
	d.Until = until
	if long := until.Sub(start); long > opstate.MaxWindow {
		what := fmt.Sprintf("lasts %s, longer than %s", long.Round(time.Minute), opstate.MaxWindow)
		err := forcePast(ctx, "is scheduled for a window that "+what, req.GetForce(), func() error {
			return status.Errorf(codes.FailedPrecondition, "refused: the window %s; check, then retry with --force as admin (or undrain it yourself)", what)
		})
		if err != nil {
			return d, err
		}
	}
	return d, nil
}

// sameDrain says whether d is already stored as asked (nothing to do), and
// refuses a scheduled drain over another one of the same target that has
// not ended: one key holds one drain per target, so the second would
// silently replace the first, and its end would undrain what the first
// drained. The operator undrains the first, then drains again.
func (s *Service) sameDrain(d opstate.Drain, now time.Time) (bool, error) {
	for _, old := range s.drains() {
		if old.Kind != d.Kind || old.Name != d.Name || old.State(now) == opstate.DrainEnded {
			continue
		}
		window := old.From.Equal(d.From) && old.Until.Equal(d.Until)
		if window && old.Reason == d.Reason && (old.Forced || !d.Forced) {
			return true, nil
		}
		if !window && (old.Scheduled() || d.Scheduled()) {
			has := "is drained until undrained"
			if old.Scheduled() {
				has = fmt.Sprintf("has a scheduled drain (%s, %s)", old.Window(), old.State(now))
			}
			return false, status.Errorf(codes.FailedPrecondition, "refused: %s %s %s; undrain it first, then drain it with the window you want", d.Kind, d.Name, has)
		}
	}
	return false, nil
}

// guardInstants are the moments at which the removal guard judges d: its
// start (now at the earliest), and each start of another drain inside d's
// window, where the drains in force grow. Between them they only shrink.
func guardInstants(d opstate.Drain, others []opstate.Drain, now time.Time) []time.Time {
	start := now
	if d.From.After(now) {
		start = d.From
	}
	out := []time.Time{start}
	for _, o := range others {
		if o.From.After(start) && (d.Until.IsZero() || o.From.Before(d.Until)) {
			out = append(out, o.From)
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return slices.Compact(out)
}

// notEnded is the drains of ds in force at t or later.
func notEnded(ds []opstate.Drain, t time.Time) []opstate.Drain {
	return slices.DeleteFunc(slices.Clone(ds), func(d opstate.Drain) bool { return d.State(t) == opstate.DrainEnded })
}

// drainsAt is the drains of ds in force at t.
func drainsAt(ds []opstate.Drain, t time.Time) []opstate.Drain {
	var out []opstate.Drain
	for _, d := range ds {
		if d.State(t) == opstate.DrainActive {
			out = append(out, d)
		}
	}
	return out
}

// HousekeepingMethod is the method of the audit records the center's
// housekeeping writes (not an RPC: no caller asked).
const HousekeepingMethod = "housekeeping"

// EndDrains deletes the drains whose window ended at now, each if still
// the one read, and audits each ("ended by its window"); it returns how
// many it deleted. The schedulers stopped applying them at their end by
// themselves: this only tidies etcd, so it may run late.
func (s *Service) EndDrains(ctx context.Context, now time.Time) (int, error) {
	n := 0
	for _, d := range s.drains() {
		ended, err := opstate.EndDrain(ctx, s.Store.Client(), s.Store.Prefix(), d, now)
		if err != nil {
			return n, fmt.Errorf("ending drain %s/%s: %w", d.Kind, d.Name, err)
		}
		if !ended {
			continue
		}
		n++
		s.Logger.Info("drain ended by its window: deleted", "kind", d.Kind, "name", d.Name, "window", d.Window())
		if s.Trail != nil {
			detail := "ended by its window (" + d.Window() + ")"
			if d.Reason != "" {
				detail += "; " + d.Reason
			}
			// Logged and counted by the trail on failure.
			_ = s.Trail.Write(ctx, audit.Record{At: now, Identity: s.ID, Role: "center", Method: HousekeepingMethod,
				Target: string(d.Kind) + "/" + d.Name, Code: codes.OK.String(), Detail: detail})
		}
	}
	return n, nil
}

// housekeepEvery is how often the center looks for ended drains.
const housekeepEvery = 30 * time.Second

// RunDrainHousekeeping ends ended drains (EndDrains) every 30 s until ctx
// ends, while lead says this center keeps the house (nil: always).
func (s *Service) RunDrainHousekeeping(ctx context.Context, lead func(context.Context) (bool, error)) error {
	t := time.NewTicker(housekeepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if lead != nil {
			if ok, err := lead(ctx); err != nil || !ok {
				continue
			}
		}
		if _, err := s.EndDrains(ctx, time.Now()); err != nil {
			s.Logger.Warn("ended drains not deleted yet; trying again", "component", "opstate", "err", err)
		}
	}
}
