package lab_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/chaos"
	"github.com/anysched/anysched/internal/testbed/lab"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// qoeRow is one phase of a drill report's QoE table.
type qoeRow struct {
	phase                               string
	sessions, fallback, switches, drops int
	plans                               int
	objective, atDesired                float64
	plannedBy                           string
	seen                                bool
}

// qoeTable reads the QoE table a failover drill prints at its end.
func qoeTable(report string) map[string]qoeRow {
	rows := map[string]qoeRow{}
	in := false
	for _, line := range splitLines(report) {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == "PHASE":
			in = true
		case in && len(f) >= 10:
			r := qoeRow{phase: f[0], plannedBy: strings.Join(f[9:], " ")}
			if f[1] != "-" {
				r.seen = true
				r.sessions, _ = strconv.Atoi(f[1])
				r.objective, _ = strconv.ParseFloat(f[2], 64)
				r.atDesired, _ = strconv.ParseFloat(strings.TrimSuffix(f[3], "%"), 64)
				r.fallback, _ = strconv.Atoi(f[4])
				r.switches, _ = strconv.Atoi(f[6])
				r.drops, _ = strconv.Atoi(f[7])
				r.plans, _ = strconv.Atoi(f[8])
			}
			rows[r.phase] = r
		}
	}
	return rows
}

// TestPrivilegedQoEDrill: a failover drill of a city whose viewers are
// planned by QoE, under zapping STBs. While the route is withdrawn the
// center plans the city's viewers from the city's last published plan
// (on the city's own servers, not the fallback), and hands them back;
// neither handover moves more viewers than a normal period does.
func TestPrivilegedQoEDrill(t *testing.T) {
	cities := []string{"hefei", "wuhu"}
	l := provinceWith(t, "asq", lab.Options{Cities: cities, Edges: true, QoE: true})
	for i, c := range cities {
		answeredBy(t, l, i, lab.PrimaryID(c), 60*time.Second)
	}
	const runFor = 45 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), runFor+30*time.Second)
	defer cancel()
	loadDone := viewerLoad(ctx, t, l, chaos.LoadOptions{
		Cities: cities, Viewers: lab.QoEViewers, Steady: 3, Pause: 150 * time.Millisecond, Duration: runFor, Channels: 20, Seed: 1,
		MaxRequests: 100_000,
	})
	// Plans settle for a few periods, then the drill. Meanwhile the loss
	// of each city is planned from the plans the cities publish.
	settled := time.Now().Add(10 * time.Second)
	time.Sleep(6 * time.Second)
	checkPlanFailures(t, l, cities)
	time.Sleep(time.Until(settled))
	start := time.Now()
	var out bytesBuf
	if err := runCtl(l, &out, "drill", "failover", "--region", "hefei", "--duration", "12s"); err != nil {
		t.Fatalf("drill: %v\n%s", err, out.String())
	}
	reqs := loadDone()
	t.Logf("drill report:\n%s", out.String())

	rows := qoeTable(out.String())
	before, during, after := rows["before"], rows["during"], rows["after"]
	if !before.seen || !during.seen || !after.seen {
		t.Fatalf("the drill report has no QoE figures for every phase: %+v", rows)
	}
	if !strings.Contains(during.plannedBy, lab.CenterID) || !strings.Contains(after.plannedBy, lab.PrimaryID("hefei")) {
		t.Fatalf("planned by: during %q, after %q", during.plannedBy, after.plannedBy)
	}
	// The STBs' side: hefei's requests the center answered went to hefei's
	// own servers as planned, not to the fallback city.
	var byCenter, centerFallback, cityAnswers, failed int
	for _, r := range reqs {
		if r.City != 0 || r.Start.Before(start) {
			continue
		}
		switch {
		case !r.OK():
			failed++
		case r.Instance == lab.CenterID:
			byCenter++
			if r.Result == "FALLBACK" {
				centerFallback++
			}
		default:
			cityAnswers++
		}
	}
	t.Logf("hefei's STBs from the drill on: %d answered by the center (%d FALLBACK), %d by the city, %d failed", byCenter, centerFallback, cityAnswers, failed)
	if byCenter == 0 || cityAnswers == 0 {
		t.Fatalf("the center answered %d, the city %d", byCenter, cityAnswers)
	}
	if centerFallback*20 > byCenter {
		t.Errorf("the center sent %d of %d hefei STBs to the fallback city", centerFallback, byCenter)
	}
	// Switches per plan across the handovers against a normal period's.
	perPlan := func(r qoeRow) float64 { return float64(r.switches) / float64(max(r.plans, 1)) }
	normal := max(perPlan(before), 0.1*float64(before.sessions))
	t.Logf("switches per plan: before %.1f, during %.1f, after %.1f (sessions %d/%d/%d, at desired %.0f%%/%.0f%%/%.0f%%)",
		perPlan(before), perPlan(during), perPlan(after), before.sessions, during.sessions, after.sessions, before.atDesired, during.atDesired, after.atDesired)
	if perPlan(during) > normal || perPlan(after) > normal {
		t.Errorf("the handovers moved more viewers than a normal period: per plan %.1f during, %.1f after, normal %.1f", perPlan(during), perPlan(after), normal)
	}
}

// checkPlanFailures: schedctl plan failures over the lab's published plans:
// every city with viewers has its viewers accounted for (planned or not)
// on its configured order (the other city or none: the lab's capital falls
// back to the center alone, which has no servers), and the proposal, which
// adds the other city, plans at least as many of them.
func checkPlanFailures(t *testing.T, l *lab.Lab, cities []string) {
	t.Helper()
	var out bytesBuf
	if err := runCtl(l, &out, "plan", "failures", "--budget", "500ms", "-o", "json"); err != nil {
		t.Fatalf("plan failures: %v\n%s", err, out.String())
	}
	var resp pb.PlanFailuresResponse
	if err := protojson.Unmarshal([]byte(out.String()), &resp); err != nil {
		t.Fatalf("plan failures: %v\n%s", err, out.String())
	}
	seen := 0
	for _, c := range resp.GetCities() {
		t.Logf("the loss of %s: %d viewers; on %v: %d planned (%d at desired), %d not; proposed %v: %d planned; reserves %v, short %.0f kbps",
			c.GetRegion(), c.GetViewers(), c.GetOrder(), c.GetConfigured().GetPlanned(), c.GetConfigured().GetAtDesired(), c.GetConfigured().GetUnplanned(),
			c.GetProposed(), c.GetProposedOutcome().GetPlanned(), c.GetReserves(), c.GetShortKbps())
		if c.GetViewers() == 0 {
			continue
		}
		seen++
		i := slices.Index(cities, c.GetRegion())
		k, p := c.GetConfigured(), c.GetProposedOutcome()
		if i < 0 || len(c.GetOrder()) > 1 || len(c.GetOrder()) == 1 && c.GetOrder()[0] != cities[1-i] || k.GetPlanned()+k.GetUnplanned() != c.GetViewers() ||
			p.GetPlanned()+p.GetUnplanned() != c.GetViewers() || p.GetPlanned() < k.GetPlanned() {
			t.Errorf("the loss of %s: %v", c.GetRegion(), c)
		}
	}
	if seen == 0 {
		t.Errorf("plan failures: no city with viewers (stale: %v)", resp.GetStale())
	}
}
