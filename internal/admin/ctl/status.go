package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/admin/statusview"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/protobuf/proto"
)

// statusCmd prints every scheduler instance, etcd's size against its
// quota and its alarms, region health, checker, drain and the centers'
// answers by city. -o json and -o yaml print the Status
// response itself, with absolute times; the tables show ages.
func statusCmd(ctx context.Context, e *env, args []string) error {
	return showStatus(ctx, e, "status", args, func(st *pb.StatusResponse) (proto.Message, func() []*table) {
		return st, func() []*table { return statusTables(st, e.clock.Now()) }
	})
}

// showStatus is a command (name) printing a view of the Status response:
// what -o json and -o yaml print, and the tables (made only for a table:
// making them sorts parts of the response).
func showStatus(ctx context.Context, e *env, name string, args []string, view func(*pb.StatusResponse) (proto.Message, func() []*table)) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	o := outputFlag(fs, formatTable, formatYAML, formatJSON)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	resp, err := e.admin.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		return err
	}
	data, tables := view(resp)
	return render(e.out, o, data, func(w io.Writer) error { return writeTables(w, tables()...) })
}

// statusTables is the instances' table, then those of the other sections
// that have rows.
func statusTables(st *pb.StatusResponse, now time.Time) []*table {
	tables := []*table{instanceTable(st, now)}
	for _, t := range []*table{etcdTable(st), etcdProblemTable(st), qoeTable(st), regionTable(st), checkerTable(st, now), centerTable(st, now), drainTable(st)} {
		if len(t.rows) > 0 {
			tables = append(tables, t)
		}
	}
	return tables
}

func instanceTable(st *pb.StatusResponse, now time.Time) *table {
	t := newTable("INSTANCE", "ROLE", "REGION", "STATE", "REVISION", "DIGEST", "SNAPSHOT_AGE", "ROUTE", "BGP", "UPTIME", "VERSION")
	t.title = fmt.Sprintf("topology revision %d, digest %s%s, %d scheduler instance(s)", st.GetRevision(), shortDigest(st.GetDigest()), founded(st.GetEpoch()), len(st.GetInstances()))
	for _, in := range st.GetInstances() {
		rev := strconv.FormatInt(in.GetSnapshotRevision(), 10)
		if in.GetSnapshotRevision() != st.GetRevision() {
			rev += " (behind)"
		}
		t.add(in.GetId(), in.GetRole(), orDash(in.GetRegion()), in.GetState(), rev, servedDigest(in.GetSnapshotDigest(), st.GetDigest()), seconds(in.GetSnapshotAgeSeconds()),
			route(in), orDash(peerList(in.GetBgpPeers())), uptime(now, in.GetStartedAt().AsTime()), in.GetVersion())
	}
	return t
}

// shortDigest is a digest's first 12 hex digits, as `history` prints it.
func shortDigest(d string) string {
	if d == "" {
		return "-"
	}
	return d[:min(len(d), 12)]
}

// servedDigest is what an instance serves, marked when it is not what
// the store holds: the revisions of a rebuilt store say nothing of that.
func servedDigest(served, stored string) string {
	switch {
	case served == "":
		return "-"
	case served != stored:
		return shortDigest(served) + " (differs)"
	}
	return shortDigest(served)
}

// founded names the store's epoch (0: founded before epochs).
func founded(epoch int64) string {
	if epoch == 0 {
		return ""
	}
	return ", store founded " + time.Unix(0, epoch).UTC().Format(time.RFC3339)
}

// etcdTable is the store's size against its quota, member by member,
// and the alarms: NOSPACE stops every write in the province.
func etcdTable(st *pb.StatusResponse) *table {
	e := st.GetEtcd()
	t := newTable("ETCD_MEMBER", "DB_SIZE", "IN_USE", "QUOTA", "OF_QUOTA", "ALARMS")
	if e == nil {
		return t
	}
	alarms := map[string][]string{}
	var all []string
	for _, a := range e.GetAlarms() {
		alarms[a.GetMember()] = append(alarms[a.GetMember()], a.GetAlarm())
		all = append(all, a.GetAlarm()+" on "+orDash(a.GetMember()))
	}
	keeper := "another center keeps house"
	if e.GetLeading() {
		keeper = "this center keeps house"
	}
	alarmed := "no alarm"
	if len(all) > 0 {
		alarmed = "ALARM " + strings.Join(all, ", ")
	}
	t.title = fmt.Sprintf("etcd revision %d, compacted to %d (%s); %s", e.GetRevision(), e.GetCompactedRevision(), keeper, alarmed)
	for _, m := range e.GetMembers() {
		name := m.GetName()
		if m.GetLeader() {
			name += " (leader)"
		}
		if m.GetError() != "" {
			t.add(name, "-", "-", "-", "-", "unreachable: "+m.GetError())
			continue
		}
		share := "-"
		if q := m.GetQuotaBytes(); q > 0 {
			share = fmt.Sprintf("%.0f%%", 100*float64(m.GetDbSizeBytes())/float64(q))
		}
		t.add(name, iec(m.GetDbSizeBytes()), iec(m.GetDbSizeInUseBytes()), iec(m.GetQuotaBytes()), share, orDash(strings.Join(alarms[m.GetName()], ",")))
	}
	return t
}

// etcdProblemTable is what the housekeeper cannot mend by itself.
func etcdProblemTable(st *pb.StatusResponse) *table {
	t := newTable("ETCD_PROBLEM")
	for _, p := range st.GetEtcd().GetProblems() {
		t.add(p)
	}
	return t
}

// iec is a byte count in binary units, one decimal.
func iec(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + "B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// route is an instance's Anycast route: what it announces, or why not
// ("-" when it is not meant to announce at all).
func route(in *pb.Instance) string {
	switch {
	case in.GetAnnounced():
		return in.GetAnnounces() + " announced"
	case in.GetAnnounceReason() != "" && in.GetAnnounceReason() != "announce.mode none":
		return "withdrawn: " + in.GetAnnounceReason()
	}
	return "-"
}

func peerList(ps []*pb.BGPPeer) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = fmt.Sprintf("%s(AS%d)=%s", p.GetAddress(), p.GetAsn(), p.GetState())
	}
	return strings.Join(parts, " ")
}

func qoeTable(st *pb.StatusResponse) *table {
	t := newTable("QOE PLAN", "REGION", "SESSIONS", "PLANNED", "FALLBACK", "STARVED", "AT_DESIRED", "OBJECTIVE", "GAP", "HELD", "AGE", "PEERS", "STATE")
	row := func(id string, q *pb.QoEPlan) {
		held := "-" // no capacity stated: nothing to hold
		if c := q.GetCapacityKbps(); c > 0 {
			held = fmt.Sprintf("%.0f%%", 100*q.GetHeldKbps()/c)
		}
		t.add(id, q.GetRegion(), q.GetSessions(), q.GetPlanned(), q.GetFallback(), q.GetStarved(), fmt.Sprintf("%.0f%%", 100*q.GetAtDesired()),
			strconv.FormatFloat(q.GetObjective(), 'f', 1, 64), fmt.Sprintf("%.2f%%", 100*q.GetGap()), held, seconds(q.GetAgeSeconds()), q.GetPeers(), planState(q))
	}
	for _, in := range st.GetInstances() {
		if q := in.GetQoe(); q != nil {
			if q.GetRegion() == "" {
				q.Region = in.GetRegion()
			}
			row(in.GetId(), q)
		}
		for _, q := range in.GetPlanning() { // a center planning a fallen city
			row(in.GetId(), q)
		}
	}
	return t
}

// planState says what an operator must know of a plan: idle (holds only
// the reserve), safe mode (etcd unreachable), starved (STBs a server
// covers sent to the fallback: capacity held elsewhere).
func planState(q *pb.QoEPlan) string {
	var s []string
	if q.GetIdle() {
		s = append(s, "idle")
	}
	if q.GetSafeMode() {
		s = append(s, "safe-mode")
	}
	if q.GetStarved() > 0 {
		s = append(s, "starved")
	}
	if len(s) == 0 {
		return "planning"
	}
	return strings.Join(s, ",")
}

func regionTable(st *pb.StatusResponse) *table {
	checkers := map[string]int{}
	for _, c := range st.GetCheckers() {
		checkers[c.GetRegion()]++
	}
	// HEALTHY and UNHEALTHY are measured, DRAINED decided: a drained server
	// counts in both. A server no live checker covers is UNCHECKED; a
	// region with none checked shows "-" rather than a health it never had.
	// IPV4_DOWN and IPV6_DOWN, dual-stack servers with one address down
	// (healthy by the other), are shown once some region has one, so a
	// single-family province keeps its table.
	families := false
	for _, r := range st.GetRegions() {
		families = families || r.GetIpv4Down() > 0 || r.GetIpv6Down() > 0
	}
	header := []string{"REGION", "SERVERS", "HEALTHY", "UNHEALTHY", "UNCHECKED", "DRAINED", "AVAILABLE", "PANIC_NODES", "CHECKERS"}
	if families {
		header = append(header[:4], append([]string{"IPV4_DOWN", "IPV6_DOWN"}, header[4:]...)...)
	}
	t := newTable(header...)
	for _, r := range st.GetRegions() {
		healthy, unhealthy := strconv.Itoa(int(r.GetHealthy())), strconv.Itoa(int(r.GetUnhealthy()))
		if r.GetServers() > 0 && r.GetUnchecked() == r.GetServers() {
			healthy, unhealthy = "-", "-"
		}
		row := []any{r.GetRegion(), r.GetServers(), healthy, unhealthy}
		if families {
			row = append(row, r.GetIpv4Down(), r.GetIpv6Down())
		}
		t.add(append(row, r.GetUnchecked(), r.GetDrained(), r.GetAvailable(), r.GetPanicNodes(), checkers[r.GetRegion()])...)
	}
	return t
}

func checkerTable(st *pb.StatusResponse, now time.Time) *table {
	t := newTable("CHECKER", "REGION", "TARGETS", "UPTIME")
	for _, c := range st.GetCheckers() {
		t.add(c.GetId(), c.GetRegion(), c.GetTargets(), uptime(now, c.GetStartedAt().AsTime()))
	}
	return t
}

// centerTable is what each center answered, by the STBs' region: which
// cities' STBs the centers are serving now (a city failed over, or in no
// zone).
func centerTable(st *pb.StatusResponse, now time.Time) *table {
	t := newTable("CENTER", "STB_REGION", "ANSWERED", "FAILED", "LAST_ANSWER")
	byCenter := statusview.CentersTraffic(st)
	for _, id := range slices.Sorted(maps.Keys(byCenter)) {
		for _, rt := range byCenter[id] {
			t.add(id, rt.GetClientRegion(), rt.GetAnswered(), rt.GetFailed(), now.Sub(rt.GetLast().AsTime()).Round(100*time.Millisecond).String()+" ago")
		}
	}
	return t
}

func drainTable(st *pb.StatusResponse) *table {
	t := newTable("DRAINED", "NAME", "REASON", "SINCE", "STATE", "WINDOW")
	for _, d := range st.GetDrains() {
		t.add(d.GetKind(), d.GetName(), d.GetReason(), d.GetAt().AsTime().Format(time.RFC3339), orDash(d.GetState()), drainWindow(d))
	}
	return t
}

func uptime(now, since time.Time) string { return now.Sub(since).Round(time.Second).String() }

func seconds(s float64) string { return strconv.FormatFloat(s, 'f', 1, 64) + "s" }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
