package adminapi

import (
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/balance"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// balanceProvince is a center whose engine is rebuilt, as the center's
// watcher does, with whatever balance policy etcd holds.
type balanceProvince struct {
	svc  *Service
	snap *topology.Snapshot
	tp   *topology.Topology
	eng  atomic.Pointer[steer.Engine]
}

func newBalanceProvince(t *testing.T) *balanceProvince {
	t.Helper()
	st := etcdtest.Start(t).Store()
	tp := fixture.Province(t, fixture.Cities(2)...)
	for i := range tp.Services {
		tp.Services[i].Selection = topology.SelectSWRR
	}
	p := &balanceProvince{tp: tp, snap: fixture.Compile(t, tp)}
	p.rebuild(t, balance.DefaultConfig())
	p.svc = &Service{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Engine: p.eng.Load}
	return p
}

func (p *balanceProvince) rebuild(t *testing.T, cfg balance.Config) {
	t.Helper()
	eng, err := steer.Build(p.snap, steer.Inputs{Balance: cfg})
	if err != nil {
		t.Fatal(err)
	}
	p.eng.Store(eng)
}

func violations(err error) map[string]string {
	out := map[string]string{}
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				out[v.GetField()] = v.GetDescription()
			}
		}
	}
	return out
}

// TestBalanceSetGetReset: the balance policy is validated by the center
// (every problem named by its field, misspelt server names too), a dry run
// stores nothing, a set is stored guarded by the revision it was read at
// and audited with what it changed, get shows it with the effective policy
// and the servers it reweighs, and reset goes back to the defaults.
func TestBalanceSetGetReset(t *testing.T) {
	p := newBalanceProvince(t)
	s := p.svc
	cli, prefix := s.Store.Client(), s.Store.Prefix()
	server := p.snap.Servers[0].Name
	ctx, _ := as(t, authz.Viewer)

	got, err := s.GetBalance(ctx, &pb.GetBalanceRequest{})
	if err != nil || len(got.GetDocument()) != 0 || got.GetRevision() != 0 || len(got.GetWeights()) != 0 {
		t.Fatalf("nothing stored: %v, %v", got, err)
	}
	eff, err := balance.ParseConfig(got.GetEffective())
	if err != nil || eff.CHash.VirtualNodes != 160 || eff.CHash.Epsilon != 0.25 {
		t.Fatalf("effective defaults %+v, %v:\n%s", eff, err, got.GetEffective())
	}

	// Every problem, by field path; nothing stored.
	ctx, note := as(t, authz.Operator)
	_, err = s.SetBalance(ctx, &pb.SetBalanceRequest{Document: []byte("chash: {epsilon: -1}\nweights: {no-such-server: 5}\n")})
	v := violations(err)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(v["chash.epsilon"], "-1") {
		t.Fatalf("invalid policy: %v (violations %v)", err, v)
	}
	_, err = s.SetBalance(ctx, &pb.SetBalanceRequest{Document: []byte("weights: {no-such-server: 5}\n")})
	if v := violations(err); status.Code(err) != codes.InvalidArgument || !strings.Contains(v["weights.no-such-server"], "no server named") {
		t.Fatalf("unknown server: %v (violations %v)", err, v)
	}
	_, err = s.SetBalance(ctx, &pb.SetBalanceRequest{Document: []byte("chash: {epsilon: 0.5}\nno_such_key: 1\n")})
	if v := violations(err); status.Code(err) != codes.InvalidArgument || v["no_such_key"] == "" {
		t.Fatalf("unknown key: %v (violations %v)", err, v)
	}
	// Three mistakes of three kinds (a key that is none, a value out of
	// range, a server the topology lacks): all three in one answer.
	_, err = s.SetBalance(ctx, &pb.SetBalanceRequest{Document: []byte("no_such_key: 1\nchash: {epsilon: -1}\nweights: {no-such-server: 5}\n")})
	if v := violations(err); status.Code(err) != codes.InvalidArgument || len(v) != 3 || v["no_such_key"] == "" || !strings.Contains(v["chash.epsilon"], "-1") || !strings.Contains(v["weights.no-such-server"], "no server named") {
		t.Fatalf("three mistakes: %v (violations %v)", err, v)
	}
	if note.Target != balanceTarget {
		t.Errorf("audit target %q, want %q", note.Target, balanceTarget)
	}

	doc := []byte("chash: {epsilon: 0.5}\nweights: {" + server + ": 50}\n")
	ctx, note = as(t, authz.Operator)
	dry, err := s.SetBalance(ctx, &pb.SetBalanceRequest{Document: doc, DryRun: true, BaseRevision: -1})
	if err != nil || !dry.GetChanged() {
		t.Fatalf("dry run: %v, %v", dry, err)
	}
	if !strings.HasPrefix(note.Detail, "dry run: ") || !strings.Contains(note.Detail, "chash.epsilon: 0.25 -> 0.5") {
		t.Errorf("a dry run's audit note %+v, want it to say dry run and the change", note)
	}
	if sb, _ := opstate.ReadBalance(ctx, cli, prefix); sb.Revision != 0 {
		t.Fatalf("a dry run stored the policy (revision %d)", sb.Revision)
	}

	ctx, note = as(t, authz.Operator)
	set, err := s.SetBalance(ctx, &pb.SetBalanceRequest{Document: doc, BaseRevision: -1})
	if err != nil || !set.GetChanged() || set.GetRevision() == 0 {
		t.Fatalf("set: %v, %v", set, err)
	}
	if note.Target != balanceTarget || !strings.Contains(note.Detail, "chash.epsilon: 0.25 -> 0.5") || !strings.Contains(note.Detail, "weights."+server+": - -> 50") {
		t.Errorf("audit note %+v", note)
	}
	// Read when none was stored, or at an older revision: refused.
	for _, base := range []int64{-1, set.GetRevision() - 1} {
		ctx, _ = as(t, authz.Operator)
		_, err = s.SetBalance(ctx, &pb.SetBalanceRequest{Document: []byte("chash: {epsilon: 0.1}\n"), BaseRevision: base})
		wantCode(t, "stale base", err, codes.FailedPrecondition, "changed it meanwhile")
	}

	// The center's engine follows the stored policy (its watcher); get
	// shows the override in force.
	cfg, _ := balance.ParseConfig(doc)
	p.rebuild(t, cfg)
	ctx, _ = as(t, authz.Viewer)
	got, err = s.GetBalance(ctx, &pb.GetBalanceRequest{})
	if err != nil || string(got.GetDocument()) != string(doc) || got.GetRevision() != set.GetRevision() {
		t.Fatalf("get after set: %v, %v", got, err)
	}
	ws := got.GetWeights()
	if len(ws) != 1 || ws[0].GetServer() != server || ws[0].GetTopology() != 100 || ws[0].GetEffective() != 50 || !strings.Contains(ws[0].GetWhy(), "override") {
		t.Fatalf("effective weights %v, want %s at 50 (topology 100) by override", ws, server)
	}

	ctx, note = as(t, authz.Operator)
	reset, err := s.SetBalance(ctx, &pb.SetBalanceRequest{BaseRevision: set.GetRevision()})
	if err != nil || !reset.GetChanged() || !strings.Contains(note.Detail, "reset to the defaults") {
		t.Fatalf("reset: %v, %v (note %+v)", reset, err, note)
	}
	if sb, _ := opstate.ReadBalance(ctx, cli, prefix); sb.Revision != 0 || len(sb.Document) != 0 {
		t.Fatalf("after reset etcd holds %+v", sb)
	}
}

// TestExplainShowsEffectiveWeights: a candidate's weight is what its
// service's policy weighs it with, beside the topology's.
func TestExplainShowsEffectiveWeights(t *testing.T) {
	p := newBalanceProvince(t)
	z := p.tp.Zones[0]
	var region []string
	for _, n := range p.tp.Nodes {
		if n.Region == z.Region {
			for _, sv := range n.Servers {
				region = append(region, sv.Name)
			}
		}
	}
	cfg := balance.DefaultConfig()
	cfg.Weights = map[string]float64{region[0]: 60}
	p.rebuild(t, cfg)
	client := netip.MustParsePrefix(z.Networks[0]).Addr().Next()
	ctx, _ := as(t, authz.Viewer)
	x, err := p.svc.Explain(ctx, &pb.ExplainRequest{ClientIp: client.String(), Host: p.tp.Services[0].Hostnames[0], Path: "/ch1/index.m3u8"})
	if err != nil {
		t.Fatal(err)
	}
	seen := false
	for _, c := range x.GetCandidates() {
		want := int32(100)
		if c.GetServer() == region[0] {
			want, seen = 60, true
		}
		if c.GetWeight() != want || c.GetTopologyWeight() != 100 {
			t.Errorf("candidate %s: weight %d (topology %d), want %d (topology 100)", c.GetServer(), c.GetWeight(), c.GetTopologyWeight(), want)
		}
	}
	if !seen {
		t.Fatalf("%s is not among the candidates: %v", region[0], x.GetCandidates())
	}
}

// TestStatusCountsDrainedAndUncheckedServers: a drained healthy server is
// healthy and drained (drained is not unhealthy), and a region no checker
// covers reports its servers unchecked, not healthy.
func TestStatusCountsDrainedAndUncheckedServers(t *testing.T) {
	p := newBalanceProvince(t)
	snap := p.snap
	checked, unchecked := snap.Regions[0], snap.Regions[1]
	n := len(snap.Servers)
	av := &avail.Availability{Figures: make([]avail.Figures, n), Available: make([]bool, n), Why: make([]string, n), Healthy: make([]bool, n), Drained: make([]bool, n), Panic: make([]bool, len(snap.Nodes))}
	for i := range n {
		av.Healthy[i], av.Available[i] = true, true
	}
	for _, si := range checked.Servers {
		av.Figures[si].Measured = true
	}
	drained := checked.Servers[0]
	av.Drained[drained], av.Available[drained], av.Why[drained] = true, false, "drained: server x (disk swap)"
	av.Checkers = []avail.CheckerInfo{{ID: "c1", Region: checked.Name}}
	p.svc.Health = func() *avail.Availability { return av }
	ctx, _ := as(t, authz.Viewer)
	resp, err := p.svc.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*pb.RegionHealth{}
	for _, r := range resp.GetRegions() {
		byName[r.GetRegion()] = r
	}
	c, u := byName[checked.Name], byName[unchecked.Name]
	all := int32(len(checked.Servers))
	if c.GetHealthy() != all || c.GetDrained() != 1 || c.GetUnhealthy() != 0 || c.GetUnchecked() != 0 || c.GetAvailable() != all-1 {
		t.Errorf("checked region with a drained server: %v", c)
	}
	if ua := int32(len(unchecked.Servers)); u.GetHealthy() != 0 || u.GetUnchecked() != ua || u.GetUnhealthy() != 0 {
		t.Errorf("region without a checker: %v, want every server unchecked", u)
	}
}

// TestExplainWithoutPathAndAsRegion: without a path the URL shows the
// channel placeholder, not "live//6000"; explaining as a region keeps the
// drain reason of a drained candidate.
func TestExplainWithoutPathAndAsRegion(t *testing.T) {
	p := newBalanceProvince(t)
	snap := p.snap
	z := p.tp.Zones[0]
	ri, _ := snap.Region(z.Region)
	drained := snap.Regions[ri].Servers[0]
	n := len(snap.Servers)
	av := &avail.Availability{Figures: make([]avail.Figures, n), Available: make([]bool, n), Why: make([]string, n), Healthy: make([]bool, n), Drained: make([]bool, n), Panic: make([]bool, len(snap.Nodes))}
	for i := range n {
		av.Healthy[i], av.Available[i] = true, true
	}
	av.Drained[drained], av.Available[drained], av.Why[drained] = true, false, "drained: server "+snap.Servers[drained].Name+" (disk swap)"
	eng, err := steer.Build(snap, steer.Inputs{Avail: av, Balance: balance.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	p.eng.Store(eng)
	client := netip.MustParsePrefix(z.Networks[0]).Addr().Next().String()
	host := p.tp.Services[0].Hostnames[0]
	for _, region := range []string{"", z.Region} {
		ctx, _ := as(t, authz.Viewer)
		x, err := p.svc.Explain(ctx, &pb.ExplainRequest{ClientIp: client, Host: host, Region: region})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(strings.TrimPrefix(x.GetLocation(), "http://"), "//") || !strings.Contains(x.GetLocation(), explainChannel) {
			t.Errorf("region %q: location without a path %q", region, x.GetLocation())
		}
		found := false
		for _, c := range x.GetCandidates() {
			if c.GetServer() == snap.Servers[drained].Name {
				found = strings.Contains(c.GetWhy(), "disk swap")
			}
		}
		if !found {
			t.Errorf("region %q: the drained server's reason is missing: %v", region, x.GetCandidates())
		}
	}
}

// TestStatusCountsFamilies: a dual-stack server whose IPv6 address is down
// counts healthy and in ipv6_down, one whose IPv4 address is down in
// ipv4_down; ServerStates names the family down and why, for the console.
func TestStatusCountsFamilies(t *testing.T) {
	p := newBalanceProvince(t)
	snap := p.snap
	r := snap.Regions[0]
	n := len(snap.Servers)
	av := &avail.Availability{Figures: make([]avail.Figures, n), Available: make([]bool, n), Why: make([]string, n), Healthy: make([]bool, n), Drained: make([]bool, n), Panic: make([]bool, len(snap.Nodes)),
		FamilyDown: &[2][]bool{make([]bool, n), make([]bool, n)}, FamilyWhy: &[2][]string{make([]string, n), make([]string, n)}}
	for i := range n {
		av.Healthy[i], av.Available[i], av.Figures[i].Measured = true, true, true
	}
	v6, v4 := r.Servers[0], r.Servers[1]
	av.FamilyDown[1][v6], av.FamilyWhy[1][v6] = true, "down by 1 of 1 checkers (c1: refused)"
	av.FamilyDown[0][v4] = true
	p.svc.Health = func() *avail.Availability { return av }
	ctx, _ := as(t, authz.Viewer)
	resp, err := p.svc.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rh := range resp.GetRegions() {
		want := int32(0)
		if rh.GetRegion() == r.Name {
			want = 1
		}
		if rh.GetIpv6Down() != want || rh.GetIpv4Down() != want || (rh.GetRegion() == r.Name && rh.GetHealthy() != int32(len(r.Servers))) {
			t.Errorf("%v", rh)
		}
	}
	_, states, err := p.svc.ServerStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range states {
		switch st.Server {
		case snap.Servers[v6].Name:
			if st.FamilyDown != "ipv6" || st.FamilyWhy != "down by 1 of 1 checkers (c1: refused)" || !st.Available {
				t.Errorf("%+v", st)
			}
		case snap.Servers[v4].Name:
			if st.FamilyDown != "ipv4" {
				t.Errorf("%+v", st)
			}
		default:
			if st.FamilyDown != "" {
				t.Errorf("%+v", st)
			}
		}
	}
}
