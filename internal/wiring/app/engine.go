package app

import (
	"context"
	"time"

	"github.com/anysched/anysched/internal/province/instance"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/wiring/config"
)

// mergerGrace is how long a starting scheduler waits for the first read of
// health verdicts and operator drains before answering without them (etcd
// is unreachable: the cached snapshot is served, with every server
// available).
const mergerGrace = 5 * time.Second

// rebuildEngine has s.builder build the routing engine from the current
// snapshot, the merged health, the operator's drains and the balance
// policy, off the hot path, and swaps it in. It is called on every snapshot
// swap, health change and operator-state change; when the builder keeps
// the engine it only refreshes the availability that status shows.
func (s *Scheduler) rebuildEngine() {
	s.rebuildMu.Lock()
	defer s.rebuildMu.Unlock()
	snap := s.Syncer.Snapshot()
	if snap == nil {
		return
	}
	if !s.fed() && time.Since(s.started) < mergerGrace {
		// Drains and health not read yet (a restart): answering now could
		// send STBs to a drained server. The first read rebuilds; without
		// etcd the grace timer does (from the cached snapshot).
		return
	}
	av := s.Merger.Compute(snap, s.Ops.DrainReasons(snap))
	bc, _ := s.Ops.Balance() // an invalid document is reported by the watcher, and the defaults are in use
	in := steer.Inputs{
		DefaultRegion: s.DefaultRegion, Avail: av, Balance: bc, Now: time.Now(),
		StripQuery: s.common.HTTP.StripQueryParams,
	}
	s.policy.inputs(snap, av, &in) // ejections, overflow, GeoIP
	eng, err := s.builder.Build(snap, in)
	if err != nil {
		s.Logger.Error("routing engine built without balance tables", "component", "balance", "err", err)
	}
	if eng != nil {
		s.engine.Store(eng)
	}
	s.avail.Store(av) // with the engine kept: checker liveness, current for status
}

// fed reports whether the health verdicts and the operator state have both
// been read from etcd since the start.
func (s *Scheduler) fed() bool { return s.Merger.Synced() && s.Ops.Synced() }

// answerAfterGrace builds the routing tables once mergerGrace has passed,
// whether or not etcd could be read by then.
func (s *Scheduler) answerAfterGrace(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(time.Until(s.started.Add(mergerGrace))):
	}
	if !s.fed() {
		s.Logger.Warn("drains and health verdicts not read from etcd yet; answering from the snapshot without them", "component", "health-merger", "waited", mergerGrace)
	}
	s.rebuildEngine()
	<-ctx.Done()
	return nil
}

// drillTarget is how drills name this scheduler.
func (s *Scheduler) drillTarget() opstate.DrillTarget {
	if s.Role == instance.Central {
		return opstate.CenterTarget
	}
	return opstate.RegionTarget(s.Region)
}

// onDrill says so when a failover drill for this scheduler is seen; the
// announcer withdraws the route while the drill is in force
// (drilled), asking at every check.
func (s *Scheduler) onDrill(d opstate.Drill) {
	if s.announcer == nil || d.Target != s.drillTarget() {
		return
	}
	if now := time.Now(); d.Maintenance && d.Started.After(now) && d.Until.After(d.Started) {
		// A maintenance window ahead: the announcer withdraws at its
		// start by itself (drilled, at every check).
		s.Logger.Info("maintenance window scheduled: the route will be withdrawn", "component", "announce", "from", d.Started.Format(time.RFC3339), "until", d.Until.Format(time.RFC3339))
		return
	}
	if _, ok := s.Ops.Drill(d.Target, time.Now()); !ok {
		s.Logger.Warn("failover drill not followed: ended, longer than an hour from its start (a week for a maintenance window), or of the center while a city's drill is in force", "component", "announce", "target", d.Target.String(), "started", d.Started.Format(time.RFC3339), "until", d.Until.Format(time.RFC3339))
		return
	}
	s.Logger.Warn("failover drill: withdrawing the route", "component", "announce", "until", d.Until.Format(time.RFC3339), "maintenance", d.Maintenance)
}

// drilled says whether a failover drill withdraws this scheduler's route
// now (opstate.Watcher.Drill: bounded, ended by its key's deletion, and
// the center's only while no city's drill is in force).
func (s *Scheduler) drilled(now time.Time) bool {
	if s.Ops == nil {
		return false
	}
	_, ok := s.Ops.Drill(s.drillTarget(), now)
	return ok
}

// VerifyOpstate has the operator state watcher check the center's
// signatures with the keys the topology is verified with (set Syncer's
// Verifier first); policy is snapshot.opstate_signatures.
func (s *Scheduler) VerifyOpstate(policy string) {
	s.Ops.Verifier = s.Syncer.Verifier
	s.Ops.RequireSigned = policy == config.OpstateRequired
	switch {
	case s.Ops.Verifier == nil:
		s.Logger.Warn("no snapshot.trusted_keys: drains, drills and the balance policy are used unverified", "component", "opstate")
	case !s.Ops.RequireSigned:
		s.Logger.Info("operator state: unsigned values are used until the center signs (snapshot.opstate_signatures: transition)", "component", "opstate")
	}
}
