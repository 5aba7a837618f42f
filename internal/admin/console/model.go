package console

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/admin/statusview"
	"github.com/anysched/anysched/internal/province/instance"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"gopkg.in/yaml.v3"
)

// Who is the caller as WhoAmI answers, with what the console lets it do.
type Who struct {
	Identity string `json:"identity"`
	Role     string `json:"role"`
	Peer     string `json:"peer"`
	CanDrain bool   `json:"can_drain"`
	CanDrill bool   `json:"can_drill"`
	ReadOnly bool   `json:"read_only"`
}

func (con *Console) whoami(ctx context.Context, c authz.Caller) (Who, error) {
	var w *pb.WhoAmIResponse
	err := con.call(ctx, c, pb.Admin_WhoAmI_FullMethodName, func(ctx context.Context) (err error) {
		w, err = con.c.Service.WhoAmI(ctx, &pb.WhoAmIRequest{})
		return err
	})
	if err != nil {
		return Who{}, err
	}
	return Who{Identity: w.GetIdentity(), Role: w.GetRole(), Peer: w.GetPeer(), ReadOnly: con.c.ReadOnly,
		CanDrain: con.may(c, pb.Admin_Drain_FullMethodName), CanDrill: con.may(c, pb.Admin_Drill_FullMethodName)}, nil
}

// Province is the province view: every city with its route state, its
// schedulers, its health and who answers its STBs (Status, the drills in
// force and the regions' places from the topology).
type Province struct {
	At        int64        `json:"at"` // unix ms, for client-side rates
	Revision  int64        `json:"revision"`
	CenterID  string       `json:"center_id"`
	Lab       bool         `json:"lab"`
	Scheduler string       `json:"scheduler"`
	Cities    []City       `json:"cities"`
	Centers   []Sched      `json:"centers"`
	Checkers  []Checker    `json:"checkers"`
	Drains    []Drain      `json:"drains"`
	Results   []ResultRate `json:"results,omitempty"` // this scheduler's own answers by result
	// CenterOutside: the centers' answers to STBs in no coverage zone.
	CenterOutside       uint64 `json:"center_outside"`
	CenterOutsideFailed uint64 `json:"center_outside_failed"`
	// QoE is the QoE of each region's viewers, now and over the last ten
	// minutes (api/province?qoe=history, the QoE page): every region with
	// a plan now or lately.
	QoE []RegionQoE `json:"qoe,omitempty"`
	// Rights are the services' content-rights rules, in order.
	Rights []RightsRule `json:"rights,omitempty"`
}

// City is one region.
type City struct {
	Name string  `json:"name"`
	Lat  float64 `json:"lat"`
	Lon  float64 `json:"lon"`
	// Route: announced (a scheduler of its own announces), routed (its
	// schedulers announce nothing themselves, announce.mode none, and are
	// ready), drilled (a failover drill withdrew it), withdrawn (its
	// schedulers are up but announce nothing), center (no scheduler of its
	// own: the center answers its STBs).
	Route        string  `json:"route"`
	RouteWhy     string  `json:"route_why,omitempty"`
	DrilledUntil int64   `json:"drilled_until,omitempty"` // unix ms
	Instances    []Sched `json:"instances"`
	Health       *Health `json:"health,omitempty"`
	// CenterAnswered and CenterFailed: what every central scheduler
	// answered to the city's STBs (counters); CityAnswered/Failed what the
	// city's own schedulers report (0 when they report none).
	CenterAnswered uint64 `json:"center_answered"`
	CenterFailed   uint64 `json:"center_failed"`
	CityAnswered   uint64 `json:"city_answered"`
	CityFailed     uint64 `json:"city_failed"`
	CityReports    bool   `json:"city_reports"`
	CenterLast     int64  `json:"center_last,omitempty"` // unix ms of the centers' last answer
}

// Sched is one scheduler instance.
type Sched struct {
	ID         string  `json:"id"`
	Role       string  `json:"role"`
	Region     string  `json:"region,omitempty"`
	State      string  `json:"state"`
	Revision   int64   `json:"revision"`
	AgeS       float64 `json:"age_s"`
	Announced  bool    `json:"announced"`
	Why        string  `json:"why,omitempty"`
	Prefix     string  `json:"prefix,omitempty"`
	Version    string  `json:"version"`
	Host       string  `json:"host,omitempty"`
	Admin      string  `json:"admin,omitempty"`
	UpS        float64 `json:"up_s"`
	Peers      string  `json:"peers,omitempty"`
	QoE        *QoE    `json:"qoe,omitempty"`
	Registered float64 `json:"registered_s"` // seconds since its record was written

	// Planning: a center's plans for cities whose schedulers are gone.
	Planning []QoE `json:"planning,omitempty"`
}

// QoE is a plan summary: a city scheduler's, or a center's for a city.
type QoE struct {
	Region    string  `json:"region,omitempty"` // a center's plan: the city planned
	Sessions  int64   `json:"sessions"`
	Planned   int64   `json:"planned"`
	Fallback  int64   `json:"fallback"`
	Objective float64 `json:"objective"`
	Gap       float64 `json:"gap"`
	AgeS      float64 `json:"age_s"`
	Peers     int32   `json:"peers"`
	AtDesired float64 `json:"at_desired"`
	Switches  int64   `json:"switches"`
	Drops     int64   `json:"drops"`
	Starved   int64   `json:"starved"`
	SafeMode  bool    `json:"safe_mode,omitempty"`
	Idle      bool    `json:"idle,omitempty"`
	HeldKbps  float64 `json:"held_kbps"`
	CapKbps   float64 `json:"capacity_kbps"`
}

// Health is a region's server counts.
type Health struct {
	Servers    int32 `json:"servers"`
	Healthy    int32 `json:"healthy"`
	Unhealthy  int32 `json:"unhealthy"`
	Unchecked  int32 `json:"unchecked"`
	Drained    int32 `json:"drained"`
	Available  int32 `json:"available"`
	PanicNodes int32 `json:"panic_nodes"`
}

// Checker is a live health checker.
type Checker struct {
	ID      string  `json:"id"`
	Region  string  `json:"region"`
	Targets int32   `json:"targets"`
	UpS     float64 `json:"up_s"`
}

// Drain is an operator drain stored: in force, or scheduled (a window,
// pending or ended, as State says).
type Drain struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Reason string `json:"reason,omitempty"`
	At     int64  `json:"at"`
	State  string `json:"state,omitempty"` // pending, active or ended
	From   int64  `json:"from,omitempty"`  // the window, Unix ms; 0: that side open
	Until  int64  `json:"until,omitempty"`
}

func drainOf(d *pb.DrainEntry) Drain {
	out := Drain{Kind: d.GetKind(), Name: d.GetName(), Reason: d.GetReason(), At: d.GetAt().AsTime().UnixMilli(), State: d.GetState()}
	if d.GetFrom() != nil {
		out.From = d.GetFrom().AsTime().UnixMilli()
	}
	if d.GetUntil() != nil {
		out.Until = d.GetUntil().AsTime().UnixMilli()
	}
	return out
}

// ResultRate is a counter of this scheduler's answers.
type ResultRate struct {
	Result string  `json:"result"`
	Count  float64 `json:"count"`
}

// regionPlace is a region's name and place, from the topology document.
type regionPlace struct {
	Name string
	Loc  topology.Location
}

// places reads the regions' places from the topology (GetTopology), once a
// revision.
func (con *Console) places(ctx context.Context, c authz.Caller, rev int64) []regionPlace {
	con.regionsMu.Lock()
	defer con.regionsMu.Unlock()
	if rev == con.regionsRev && con.regions != nil {
		return con.regions
	}
	var resp *pb.GetTopologyResponse
	if err := con.call(ctx, c, pb.Admin_GetTopology_FullMethodName, func(ctx context.Context) (err error) {
		resp, err = con.c.Service.GetTopology(ctx, &pb.GetTopologyRequest{})
		return err
	}); err != nil {
		return con.regions // the last known, or none before a topology
	}
	var doc struct {
		Regions  []topology.Region  `yaml:"regions"`
		Services []topology.Service `yaml:"services"`
	}
	if err := yaml.Unmarshal(resp.GetDocument(), &doc); err != nil {
		return con.regions
	}
	out := make([]regionPlace, 0, len(doc.Regions))
	for _, r := range doc.Regions {
		p := regionPlace{Name: r.Name}
		if r.Location != nil {
			p.Loc = *r.Location
		}
		out = append(out, p)
	}
	con.rights = con.rights[:0]
	for _, sv := range doc.Services {
		if len(sv.Rights) > 0 {
			con.rights = append(con.rights, serviceRules{Service: sv.Name, Rules: sv.Rights})
		}
	}
	con.regions, con.regionsRev = out, resp.GetRevision()
	return out
}

// province reads the province; withQoE adds each region's QoE with its
// history (the QoE page's).
func (con *Console) province(ctx context.Context, c authz.Caller, withQoE bool) (*Province, error) {
	var st *pb.StatusResponse
	var drills []opstate.Drill
	err := con.call(ctx, c, pb.Admin_Status_FullMethodName, func(ctx context.Context) (err error) {
		if st, err = con.c.Service.Status(ctx, &pb.StatusRequest{}); err != nil {
			return err
		}
		drills, err = con.c.Service.Drills(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	now := time.Now()
	p := &Province{At: now.UnixMilli(), Revision: st.GetRevision(), CenterID: st.GetCenterId(), Lab: con.c.Service.Lab, Scheduler: con.c.Scheduler}
	places := con.places(ctx, c, st.GetRevision())
	idx := map[string]int{}
	city := func(name string) *City {
		i, ok := idx[name]
		if !ok {
			i = len(p.Cities)
			idx[name] = i
			p.Cities = append(p.Cities, City{Name: name})
		}
		return &p.Cities[i]
	}
	for _, pl := range places {
		cy := city(pl.Name)
		cy.Lat, cy.Lon = pl.Loc.Lat, pl.Loc.Lon
	}
	for _, in := range st.GetInstances() {
		s := sched(in, now)
		if instance.Role(in.GetRole()) == instance.Central {
			p.Centers = append(p.Centers, s)
			continue
		}
		cy := city(in.GetRegion())
		cy.Instances = append(cy.Instances, s)
		for _, t := range in.GetTraffic() { // a city scheduler's own answers, when it reports them
			if t.GetClientRegion() == in.GetRegion() {
				cy.CityAnswered += t.GetAnswered()
				cy.CityFailed += t.GetFailed()
				cy.CityReports = true
			}
		}
	}
	known := func(name string) bool { _, ok := idx[name]; return ok }
	for _, ts := range statusview.CentersTraffic(st) {
		for _, t := range ts {
			name := t.GetClientRegion()
			if name == "" || name == "none" || (len(places) > 0 && !known(name)) {
				// STBs in no coverage zone (or of a region the topology
				// no longer has): counted for the province, not a city.
				p.CenterOutside += t.GetAnswered()
				p.CenterOutsideFailed += t.GetFailed()
				continue
			}
			cy := city(name)
			cy.CenterAnswered += t.GetAnswered()
			cy.CenterFailed += t.GetFailed()
			if l := t.GetLast().AsTime().UnixMilli(); l > cy.CenterLast && t.GetAnswered() > 0 {
				cy.CenterLast = l
			}
		}
	}
	for _, rh := range st.GetRegions() {
		city(rh.GetRegion()).Health = &Health{Servers: rh.GetServers(), Healthy: rh.GetHealthy(), Unhealthy: rh.GetUnhealthy(),
			Unchecked: rh.GetUnchecked(), Drained: rh.GetDrained(), Available: rh.GetAvailable(), PanicNodes: rh.GetPanicNodes()}
	}
	drilled := map[string]time.Time{}
	for _, d := range drills {
		if d.Until.After(now) && !d.Target.Center {
			drilled[d.Target.Region] = d.Until
		}
	}
	for i := range p.Cities {
		routeState(&p.Cities[i], drilled)
	}
	for _, ch := range st.GetCheckers() {
		p.Checkers = append(p.Checkers, Checker{ID: ch.GetId(), Region: ch.GetRegion(), Targets: ch.GetTargets(), UpS: now.Sub(ch.GetStartedAt().AsTime()).Seconds()})
	}
	for _, d := range st.GetDrains() {
		p.Drains = append(p.Drains, drainOf(d))
	}
	p.Results = con.results()
	p.Rights = con.rightsAt(now)
	con.qoe.observe(st, now, con.knownRegion)
	if withQoE {
		p.QoE = con.qoe.view(st, now, p.Cities)
	}
	return p, nil
}

// knownRegion reports whether the topology last read has region.
func (con *Console) knownRegion(region string) bool {
	con.regionsMu.Lock()
	defer con.regionsMu.Unlock()
	for _, r := range con.regions {
		if r.Name == region {
			return true
		}
	}
	return false
}

// routeState says how the city's STBs are routed.
func routeState(cy *City, drilled map[string]time.Time) {
	if until, ok := drilled[cy.Name]; ok {
		cy.Route, cy.DrilledUntil = "drilled", until.UnixMilli()
		cy.RouteWhy = "a failover drill withdrew its route until " + until.Local().Format(time.TimeOnly)
		return
	}
	if len(cy.Instances) == 0 {
		cy.Route, cy.RouteWhy = "center", "no scheduler of its own is registered: the center answers its STBs"
		return
	}
	var why string
	for _, in := range cy.Instances {
		switch {
		case in.Announced:
			cy.Route, cy.RouteWhy = "announced", in.ID+" announces "+in.Prefix
			return
		case in.Why == store.NotAnnouncedModeNone && instance.State(in.State) == instance.Ready:
			cy.Route, cy.RouteWhy = "routed", "its schedulers announce nothing themselves ("+store.NotAnnouncedModeNone+"): routed by the host"
		case why == "":
			why = in.ID + ": " + in.Why
		}
	}
	if cy.Route == "" {
		cy.Route, cy.RouteWhy = "withdrawn", why
	}
}

func sched(in *pb.Instance, now time.Time) Sched {
	s := Sched{ID: in.GetId(), Role: in.GetRole(), Region: in.GetRegion(), State: in.GetState(), Revision: in.GetSnapshotRevision(),
		AgeS: in.GetSnapshotAgeSeconds(), Announced: in.GetAnnounced(), Why: in.GetAnnounceReason(), Prefix: in.GetAnnounces(),
		Version: in.GetVersion(), Host: in.GetHostname(), Admin: in.GetAdminAddress(),
		UpS: now.Sub(in.GetStartedAt().AsTime()).Seconds(), Registered: now.Sub(in.GetUpdatedAt().AsTime()).Seconds()}
	for i, p := range in.GetBgpPeers() {
		if i > 0 {
			s.Peers += ", "
		}
		s.Peers += p.GetAddress() + "=" + p.GetState()
	}
	if q := in.GetQoe(); q != nil {
		v := qoeOf(q)
		s.QoE = &v
	}
	for _, q := range in.GetPlanning() {
		s.Planning = append(s.Planning, qoeOf(q))
	}
	return s
}

func qoeOf(q *pb.QoEPlan) QoE {
	return QoE{Region: q.GetRegion(), Sessions: q.GetSessions(), Planned: q.GetPlanned(), Fallback: q.GetFallback(), Objective: q.GetObjective(),
		Gap: q.GetGap(), AgeS: q.GetAgeSeconds(), Peers: q.GetPeers(), AtDesired: q.GetAtDesired(), Switches: q.GetSwitches(),
		Drops: q.GetDrops(), Starved: q.GetStarved(), SafeMode: q.GetSafeMode(), Idle: q.GetIdle(), HeldKbps: q.GetHeldKbps(), CapKbps: q.GetCapacityKbps()}
}

// results sums this scheduler's anysched_requests_total by result.
func (con *Console) results() []ResultRate {
	if con.c.Gatherer == nil {
		return nil
	}
	mfs, err := con.c.Gatherer.Gather()
	if err != nil {
		return nil
	}
	by := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "anysched_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					by[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	out := make([]ResultRate, 0, len(by))
	for r, n := range by {
		out = append(out, ResultRate{Result: r, Count: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Result < out[j].Result })
	return out
}

// ServersView is the health page: every server with its verdict.
type ServersView struct {
	Revision int64    `json:"revision"`
	Servers  []Server `json:"servers"`
	Drains   []Drain  `json:"drains"`
	Error    string   `json:"error,omitempty"`
}

// Server is one server's state.
type Server struct {
	Server   string `json:"server"`
	Node     string `json:"node"`
	Region   string `json:"region"`
	Address  string `json:"address"`
	Address6 string `json:"address6,omitempty"`
	Verdict  string `json:"verdict"` // available, unhealthy, drained, ejected, unavailable
	// FamilyDown: the family (ipv4, ipv6) whose address of a dual-stack
	// server is down while the other works, FamilyWhy why.
	FamilyDown string  `json:"family_down,omitempty"`
	FamilyWhy  string  `json:"family_why,omitempty"`
	Why        string  `json:"why,omitempty"`
	Measured   bool    `json:"measured"`
	Panic      bool    `json:"panic,omitempty"`
	SinceS     float64 `json:"since_s,omitempty"`
	RTTms      float64 `json:"rtt_ms,omitempty"`
	Loss       float64 `json:"loss,omitempty"`
	Weight     int     `json:"weight"`
	Effective  float64 `json:"effective"`
	WeightWhy  string  `json:"weight_why,omitempty"`
}

func (con *Console) servers(ctx context.Context, c authz.Caller) (*ServersView, error) {
	v := &ServersView{}
	var st *pb.StatusResponse
	err := con.call(ctx, c, pb.Admin_Status_FullMethodName, func(ctx context.Context) error {
		var err error
		if st, err = con.c.Service.Status(ctx, &pb.StatusRequest{}); err != nil {
			return err
		}
		rev, ss, serr := con.c.Service.ServerStates(ctx)
		if serr != nil {
			v.Error = serrMessage(serr)
			return nil
		}
		v.Revision = rev
		now := time.Now()
		for _, s := range ss {
			sv := Server{Server: s.Server, Node: s.Node, Region: s.Region, Address: s.Address, Address6: s.Address6, FamilyDown: s.FamilyDown, FamilyWhy: s.FamilyWhy, Why: s.Why, Measured: s.Measured,
				Panic: s.PanicNode, RTTms: ms(s.RTT), Loss: s.Loss, Weight: s.Weight, Effective: s.Effective, WeightWhy: s.WeightWhy}
			if !s.Since.IsZero() {
				sv.SinceS = now.Sub(s.Since).Seconds()
			}
			sv.Verdict = verdict(s.Available, s.Healthy, s.Drained, s.Measured, s.Why)
			v.Servers = append(v.Servers, sv)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, d := range st.GetDrains() {
		v.Drains = append(v.Drains, drainOf(d))
	}
	return v, nil
}

// verdict names a server's state in one word; unchecked is available
// (no live checker reports on it: health fails open), as Status counts it.
func verdict(available, healthy, drained, measured bool, why string) string {
	switch {
	case drained:
		return "drained"
	case !healthy:
		return "unhealthy"
	case strings.HasPrefix(why, "ejected:"):
		return "ejected"
	case !available:
		return "unavailable"
	case !measured:
		return "unchecked"
	}
	return "available"
}

// HistoryView is the topology's history (History).
type HistoryView struct {
	Current int64          `json:"current"`
	Entries []HistoryEntry `json:"entries"`
}

// HistoryEntry is one applied revision.
type HistoryEntry struct {
	Revision int64  `json:"revision"`
	At       int64  `json:"at"`
	Identity string `json:"identity"`
	Note     string `json:"note,omitempty"`
	Summary  string `json:"summary,omitempty"`
	Kept     bool   `json:"kept"`
}

func (con *Console) history(ctx context.Context, c authz.Caller) (*HistoryView, error) {
	var h *pb.HistoryResponse
	if err := con.call(ctx, c, pb.Admin_History_FullMethodName, func(ctx context.Context) (err error) {
		h, err = con.c.Service.History(ctx, &pb.HistoryRequest{Limit: 50})
		return err
	}); err != nil {
		return nil, err
	}
	v := &HistoryView{Current: h.GetCurrent()}
	for _, e := range h.GetEntries() {
		sum := ""
		if s := e.GetSummary(); s != nil {
			sum = strconv.Itoa(int(s.GetRegions())) + " regions, " + strconv.Itoa(int(s.GetNodes())) + " nodes, " +
				strconv.Itoa(int(s.GetServers())) + " servers, " + strconv.Itoa(int(s.GetZones())) + " zones"
		}
		v.Entries = append(v.Entries, HistoryEntry{Revision: e.GetRevision(), At: e.GetAppliedAt().AsTime().UnixMilli(), Identity: e.GetIdentity(),
			Note: e.GetNote(), Summary: sum, Kept: e.GetKept()})
	}
	return v, nil
}

// DiffView is DiffTopology's answer.
type DiffView struct {
	From           int64         `json:"from"`
	To             int64         `json:"to"`
	ServersBefore  int32         `json:"servers_before"`
	ServersAfter   int32         `json:"servers_after"`
	NetworksBefore int32         `json:"networks_before"`
	NetworksAfter  int32         `json:"networks_after"`
	Emptied        []string      `json:"emptied_regions,omitempty"`
	Sections       []DiffSection `json:"sections"`
}

// DiffSection is one kind's changes.
type DiffSection struct {
	Kind    string   `json:"kind"`
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
	Changed []string `json:"changed,omitempty"`
}

func (con *Console) diff(ctx context.Context, c authz.Caller, r *http.Request) (*DiffView, error) {
	from, _ := strconv.ParseInt(r.FormValue("from"), 10, 64)
	to, _ := strconv.ParseInt(r.FormValue("to"), 10, 64)
	var d *pb.DiffTopologyResponse
	if err := con.call(ctx, c, pb.Admin_DiffTopology_FullMethodName, func(ctx context.Context) (err error) {
		d, err = con.c.Service.DiffTopology(ctx, &pb.DiffTopologyRequest{FromRevision: from, ToRevision: to})
		return err
	}); err != nil {
		return nil, err
	}
	df := d.GetDiff()
	v := &DiffView{From: d.GetFromRevision(), To: d.GetToRevision(), ServersBefore: df.GetServersBefore(), ServersAfter: df.GetServersAfter(),
		NetworksBefore: df.GetNetworksBefore(), NetworksAfter: df.GetNetworksAfter(), Emptied: df.GetEmptiedRegions()}
	for _, s := range df.GetSections() {
		ds := DiffSection{Kind: s.GetKind(), Added: s.GetAdded(), Removed: s.GetRemoved()}
		for _, ch := range s.GetChanged() {
			line := ch.GetName()
			for i, f := range ch.GetFields() {
				if i == 0 {
					line += ": "
				} else {
					line += ", "
				}
				line += f
			}
			ds.Changed = append(ds.Changed, line)
		}
		v.Sections = append(v.Sections, ds)
	}
	return v, nil
}
