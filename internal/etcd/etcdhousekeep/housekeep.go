// Package etcdhousekeep keeps the province's etcd in shape without an
// operator: it compacts the history by revision so that it stays bounded
// (etcd's own compactor bounds either revisions or time, and the
// province's plan state is bytes per second), defragments a member whose
// backend has much free space, one member at a time, and clears the
// NOSPACE alarm with the documented recovery (compact, defragment every
// member, disarm) when that makes room. It reports the backend's size
// against its quota and the alarms, for metrics, schedctl status and the
// alert (docs/operations.md, "etcd housekeeping and the NOSPACE alarm").
//
// The central scheduler runs it against whichever etcd it uses. Every
// center watches; only one maintains (Options.Lead), so that two centers
// never defragment two members at once.
package etcdhousekeep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/prometheus/client_golang/prometheus"
)

// Timeouts of the calls that may take long: a compaction deletes history
// in batches, a defragmentation rewrites the member's whole file.
const (
	callTimeout    = 10 * time.Second
	compactTimeout = 5 * time.Minute
	defragTimeout  = 10 * time.Minute
	answerTimeout  = time.Minute
	answerPoll     = 100 * time.Millisecond
	// defaultQuota is etcd's own when a member reports none (before 3.6).
	defaultQuota = 2 << 30
)

// Member is one etcd member as the housekeeper last read it.
type Member struct {
	ID       uint64
	Name     string
	Endpoint string // the client URL the housekeeper reaches it on
	Leader   bool
	// DBSize is the backend file's size, what counts against Quota;
	// DBSizeInUse what it holds (the rest is free space).
	DBSize, DBSizeInUse, Quota int64
	Err                        string // its status could not be read
}

// Free is the space a defragmentation would give back.
func (m Member) Free() int64 { return m.DBSize - m.DBSizeInUse }

// Alarm is an alarm etcd has raised on a member.
type Alarm struct {
	MemberID uint64
	Member   string // its name, when known
	Type     string // AlarmNoSpace, AlarmCorrupt
}

// Status is what the housekeeper last saw and did.
type Status struct {
	At      time.Time // when the members were last read; zero: never
	Leading bool      // this center maintains; the others only watch
	// Revision is the store's; Compacted the revision this housekeeper
	// last compacted to (0: none yet).
	Revision, Compacted int64
	Members             []Member
	Alarms              []Alarm
	// Problems are what the housekeeper cannot mend by itself, for the
	// operator (docs/operations.md says what to do).
	Problems       []string
	LastCompaction time.Time
	LastDefrag     time.Time
}

// Options adds what the configuration file does not say.
type Options struct {
	// Lead reports whether this housekeeper maintains: several centers
	// share one etcd and only one may defragment. nil: always.
	Lead func(context.Context) (bool, error)
}

// Housekeeper compacts, defragments and clears NOSPACE (package comment).
type Housekeeper struct {
	cli  *clientv3.Client
	cfg  Config
	lead func(context.Context) (bool, error)
	log  *slog.Logger
	m    *metrics

	// Run's own state.
	hist        history
	leading     bool
	compacted   int64
	lastCompact time.Time
	lastDefrag  time.Time
	noRoomAt    int64             // the revision NOSPACE was found to have no room at
	troubles    map[string]string // kind -> what was logged, until it clears

	mu     sync.Mutex
	status Status
}

// New makes a housekeeper over cli with c as decoded (the wiring checks
// it); log is already With the component.
func New(cli *clientv3.Client, c Config, o Options, reg prometheus.Registerer, log *slog.Logger) *Housekeeper {
	return &Housekeeper{cli: cli, cfg: c, lead: o.Lead, log: log, m: newMetrics(reg), troubles: map[string]string{}}
}

// Status returns what the housekeeper last saw.
func (h *Housekeeper) Status() Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.status
	s.Members, s.Alarms, s.Problems = slices.Clone(s.Members), slices.Clone(s.Alarms), slices.Clone(s.Problems)
	return s
}

// Run keeps house every Interval until ctx ends; etcd's failures are
// logged and retried, never returned.
func (h *Housekeeper) Run(ctx context.Context) error {
	// No defragmentation for defrag_min_interval after a start, but for
	// NOSPACE: another center may be in the middle of one, before it sees
	// this one take the lead.
	h.lastDefrag = time.Now()
	tick := time.NewTicker(h.cfg.Interval)
	defer tick.Stop()
	for {
		h.round(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// round reads the members and alarms, maintains when this center leads,
// and publishes what it saw.
func (h *Housekeeper) round(ctx context.Context) {
	now := time.Now()
	obs, err := h.observe(ctx)
	if err != nil {
		if ctx.Err() == nil {
			h.m.statusErrors.Inc()
			h.trouble("status", slog.LevelWarn, "cannot read etcd's members, status or alarms; housekeeping waits", "err", err)
		}
		return
	}
	h.cleared("status", "etcd's status readable again")
	h.hist.record(now, obs.revision, max(h.cfg.MaxHistory, h.cfg.MinHistory))
	h.follow(ctx)
	if h.leading && h.cfg.Maintain {
		obs = h.maintain(ctx, now, obs)
	}
	h.publish(now, obs)
}

// follow asks whether this center leads, and says when that changes.
func (h *Housekeeper) follow(ctx context.Context) {
	lead := h.leads(ctx)
	if lead != h.leading {
		if lead {
			h.log.Info("this center keeps etcd's house", "maintain", h.cfg.Maintain)
		} else {
			h.log.Info("another center keeps etcd's house; watching only")
		}
	}
	h.leading = lead
}

// leads asks Options.Lead; not knowing, it leaves the house to a center
// that knows.
func (h *Housekeeper) leads(ctx context.Context) bool {
	if h.lead == nil {
		return true
	}
	lead, err := h.lead(ctx)
	return err == nil && lead
}

// maintain clears NOSPACE, or else compacts and defragments when due; it
// returns the members as they are afterwards.
func (h *Housekeeper) maintain(ctx context.Context, now time.Time, obs observation) observation {
	if obs.alarmed(pb.AlarmType_NOSPACE) {
		return h.recover(ctx, now, obs)
	}
	h.cleared("nospace", "etcd has room again")
	if now.Sub(h.lastCompact) >= h.cfg.CompactInterval {
		h.lastCompact = now
		h.compact(ctx, h.hist.target(h.cfg, now, obs.revision))
	}
	if now.Sub(h.lastDefrag) < h.cfg.DefragMinInterval {
		return obs
	}
	var todo []Member
	for _, m := range obs.ordered() {
		if m.Err == "" && float64(m.Free()) >= h.cfg.DefragFreeRatio*float64(quota(m)) {
			todo = append(todo, m)
		}
	}
	if len(todo) == 0 {
		return obs
	}
	h.lastDefrag = now
	h.defragment(ctx, todo, "free space")
	return h.reobserve(ctx, obs)
}

// recover is the documented NOSPACE recovery: compact all history,
// defragment every member one by one, disarm. Only when that makes room:
// the first member defragmented tells what the data really takes (etcd
// counts the pages a compaction freed as in use until its next commit,
// and under NOSPACE nothing commits), and when that is not well under its
// quota the housekeeper says so once and leaves the alarm to the
// operator, trying again once data was deleted (the revision moved) or
// after defrag_min_interval.
func (h *Housekeeper) recover(ctx context.Context, now time.Time, obs observation) observation {
	// Writes are stopped: history is all that can go, the newest included.
	if !h.compact(ctx, obs.revision) {
		h.m.recoveries.WithLabelValues("error").Inc()
		return obs
	}
	if h.noRoomAt == obs.revision && now.Sub(h.lastDefrag) < h.cfg.DefragMinInterval {
		h.m.recoveries.WithLabelValues("no_room").Inc()
		return obs
	}
	ms := obs.ordered()
	for _, m := range ms {
		if m.Err != "" {
			h.m.recoveries.WithLabelValues("error").Inc()
			h.trouble("nospace", slog.LevelError, "etcd is out of space (NOSPACE) and a member does not answer; the alarm stays", "member", m.Name, "err", m.Err)
			return obs
		}
	}
	h.lastDefrag = now
	if !h.defragment(ctx, ms[:1], "NOSPACE") {
		h.m.recoveries.WithLabelValues("error").Inc()
		return h.reobserve(ctx, obs)
	}
	after := h.reobserve(ctx, obs)
	if i := slices.IndexFunc(after.members, func(m Member) bool { return m.ID == ms[0].ID }); i >= 0 {
		if m := after.members[i]; float64(m.DBSize) >= h.cfg.RecoverBelowRatio*float64(quota(m)) {
			h.noRoomAt = obs.revision
			h.m.recoveries.WithLabelValues("no_room").Inc()
			h.trouble("nospace", slog.LevelError, "etcd is out of space (NOSPACE) and its live data fills it: compacted and defragmented, it still takes too much of the quota to clear the alarm; every write in the province fails until an operator raises the quota or deletes data (docs/operations.md, \"etcd housekeeping and the NOSPACE alarm\")",
				"member", m.Name, "db_size_bytes", m.DBSize, "quota_bytes", quota(m), "recover_below_ratio", h.cfg.RecoverBelowRatio)
			return after
		}
	}
	if !h.defragment(ctx, ms[1:], "NOSPACE") {
		h.m.recoveries.WithLabelValues("error").Inc()
		return h.reobserve(ctx, after)
	}
	for _, a := range after.alarms {
		if a.Alarm != pb.AlarmType_NOSPACE {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := h.cli.AlarmDisarm(cctx, (*clientv3.AlarmMember)(a))
		cancel()
		if err != nil {
			h.m.recoveries.WithLabelValues("error").Inc()
			h.trouble("nospace", slog.LevelError, "etcd is out of space (NOSPACE): compacted and defragmented, but disarming the alarm failed"+permissionHint(err), "err", err)
			return after
		}
	}
	h.m.recoveries.WithLabelValues("disarmed").Inc()
	h.noRoomAt = 0
	h.log.Warn("etcd NOSPACE cleared: history compacted, every member defragmented, alarm disarmed; writes flow again", "revision", obs.revision)
	delete(h.troubles, "nospace")
	return h.reobserve(ctx, after)
}

// compact compacts the history up to rev (0: nothing to do) and waits
// until etcd has deleted it; false when it failed.
func (h *Housekeeper) compact(ctx context.Context, rev int64) bool {
	if rev <= h.compacted {
		return true
	}
	cctx, cancel := context.WithTimeout(ctx, compactTimeout)
	_, err := h.cli.Compact(cctx, rev, clientv3.WithCompactPhysical())
	cancel()
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		// etcd's own compactor went further already.
	case err != nil:
		if ctx.Err() == nil {
			h.m.compactions.WithLabelValues("error").Inc()
			h.trouble("compact", slog.LevelError, "compacting etcd's history failed; it grows until this succeeds"+permissionHint(err), "revision", rev, "err", err)
		}
		return false
	}
	h.m.compactions.WithLabelValues("ok").Inc()
	h.cleared("compact", "compacting etcd's history works again")
	h.compacted = rev
	h.mu.Lock()
	h.status.LastCompaction = time.Now()
	h.mu.Unlock()
	h.log.Debug("compacted etcd's history", "revision", rev)
	return true
}

// defragment defragments the members one at a time, each answering again
// before the next: a member answers nothing while it defragments, and
// two at once would stall a three-member cluster. False when one failed
// (the rest wait for the next round).
func (h *Housekeeper) defragment(ctx context.Context, ms []Member, why string) bool {
	for i, m := range ms {
		if i > 0 && !h.leads(ctx) {
			h.log.Info("another center took the lead: leaving the other members' defragmentation to it", "done", i, "members", len(ms))
			return false
		}
		start := time.Now()
		dctx, cancel := context.WithTimeout(ctx, defragTimeout)
		_, err := h.cli.Defragment(dctx, m.Endpoint)
		cancel()
		if err == nil {
			err = h.awaitAnswer(ctx, m.Endpoint)
		}
		if err != nil {
			if ctx.Err() == nil {
				h.m.defrags.WithLabelValues("error").Inc()
				h.trouble("defrag", slog.LevelError, "defragmenting an etcd member failed"+permissionHint(err), "member", m.Name, "endpoint", m.Endpoint, "err", err)
			}
			return false
		}
		h.m.defrags.WithLabelValues("ok").Inc()
		h.cleared("defrag", "defragmenting etcd works again")
		h.mu.Lock()
		h.status.LastDefrag = time.Now()
		h.mu.Unlock()
		h.log.Info("defragmented an etcd member", "member", m.Name, "why", why, "free_bytes_before", m.Free(), "db_size_bytes_before", m.DBSize, "took", time.Since(start).Round(time.Millisecond).String())
	}
	return true
}

// awaitAnswer waits until the member at endpoint answers a status call.
func (h *Housekeeper) awaitAnswer(ctx context.Context, endpoint string) error {
	deadline := time.Now().Add(answerTimeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, answerPoll*10)
		_, err := h.cli.Status(cctx, endpoint)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer %s after defragmenting: %w", answerTimeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(answerPoll):
		}
	}
}

// permissionHint says what to do about a refusal: etcd allows compaction,
// defragmentation and disarming to its root role alone.
func permissionHint(err error) string {
	if errors.Is(err, rpctypes.ErrPermissionDenied) {
		return " (etcd allows it to the root role only: grant it to the center's etcd user, schedctl etcd-roles --center-maintenance, or set etcd.housekeeping.maintain: false and keep house by hand; docs/security.md)"
	}
	return ""
}

// trouble logs a failure of kind once, until it clears or another
// message replaces it: a round every few seconds must not repeat it. The
// message, with its figures, is also a problem in the status.
func (h *Housekeeper) trouble(kind string, level slog.Level, msg string, args ...any) {
	if prev, logged := h.troubles[kind]; !logged || !strings.HasPrefix(prev, msg) {
		h.log.Log(context.Background(), level, msg, args...)
	}
	var b strings.Builder
	b.WriteString(msg)
	for i := 0; i+1 < len(args); i += 2 {
		fmt.Fprintf(&b, " %v=%v", args[i], args[i+1])
	}
	h.troubles[kind] = b.String()
}

// cleared ends a trouble of kind, saying so when one was logged.
func (h *Housekeeper) cleared(kind, msg string) {
	if _, logged := h.troubles[kind]; logged {
		delete(h.troubles, kind)
		h.log.Info(msg)
	}
}

func quota(m Member) int64 {
	if m.Quota > 0 {
		return m.Quota
	}
	return defaultQuota
}

// publish sets the status and the gauges from obs.
func (h *Housekeeper) publish(now time.Time, obs observation) {
	var alarms []Alarm
	names := map[uint64]string{}
	for _, m := range obs.members {
		names[m.ID] = m.Name
	}
	active := map[string]bool{}
	for _, a := range obs.alarms {
		alarms = append(alarms, Alarm{MemberID: a.MemberID, Member: names[a.MemberID], Type: a.Alarm.String()})
		active[a.Alarm.String()] = true
		if a.Alarm == pb.AlarmType_CORRUPT {
			h.trouble("corrupt", slog.LevelError, "etcd raised CORRUPT: a member's data differs from the others'; the housekeeper leaves it to an operator (etcd's documentation: recover the member from a snapshot)", "member", names[a.MemberID])
		}
	}
	if !active[AlarmCorrupt] {
		h.cleared("corrupt", "etcd's CORRUPT alarm is gone")
	}
	for _, t := range []string{AlarmNoSpace, AlarmCorrupt} {
		h.m.alarm.WithLabelValues(t).Set(boolGauge(active[t]))
	}
	for _, m := range obs.members {
		if m.Err == "" {
			h.m.dbSize.WithLabelValues(m.Name).Set(float64(m.DBSize))
			h.m.dbInUse.WithLabelValues(m.Name).Set(float64(m.DBSizeInUse))
			h.m.quota.WithLabelValues(m.Name).Set(float64(quota(m)))
		}
	}
	h.m.revision.Set(float64(obs.revision))
	h.m.compacted.Set(float64(h.compacted))
	h.m.leading.Set(boolGauge(h.leading))
	var problems []string
	for _, p := range h.troubles {
		problems = append(problems, p)
	}
	slices.Sort(problems)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.status.At, h.status.Leading, h.status.Revision, h.status.Compacted = now, h.leading, obs.revision, h.compacted
	h.status.Members, h.status.Alarms, h.status.Problems = obs.members, alarms, problems
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
