package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/anysched/anysched/internal/admin/authz"
	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// FailuresView is the QoE page's plan for the loss of each city (the admin
// API's PlanFailures), as text cells: the page only lays them out.
type FailuresView struct {
	Revision int64         `json:"revision"`
	Stale    []string      `json:"stale,omitempty"`
	Idle     []string      `json:"idle,omitempty"` // cities with no viewers known
	Cities   []FailureCity `json:"cities"`
}

// FailureCity is one city's loss: its viewers on its configured order,
// and the proposal.
type FailureCity struct {
	Region    string `json:"region"`
	Viewers   int64  `json:"viewers"`
	Order     string `json:"order"`
	Planned   string `json:"planned"`    // "30 of 40, 6 at desired"
	Unplanned int64  `json:"unplanned"`  // given no server
	TakenBy   string `json:"taken_by"`   // "wuhu 30"
	Proposed  string `json:"proposed"`   // "feixi > wuhu"
	PPlanned  string `json:"p_planned"`  // as Planned, of the proposal
	Reserve   string `json:"reserve"`    // "feixi 200.0 Mbps"
	ShortMbps string `json:"short_mbps"` // desired bandwidth nobody has spare
}

func (con *Console) apiFailures(w http.ResponseWriter, r *http.Request) {
	con.read(w, r, func(ctx context.Context, c authz.Caller) (any, error) { return con.failures(ctx, c) })
}

func (con *Console) failures(ctx context.Context, c authz.Caller) (*FailuresView, error) {
	var resp *pb.PlanFailuresResponse
	if err := con.call(ctx, c, pb.Admin_PlanFailures_FullMethodName, func(ctx context.Context) (err error) {
		resp, err = con.c.Service.PlanFailures(ctx, &pb.PlanFailuresRequest{})
		return err
	}); err != nil {
		return nil, err
	}
	v := &FailuresView{Revision: resp.GetRevision(), Stale: resp.GetStale(), Cities: []FailureCity{}}
	for _, fc := range resp.GetCities() {
		if fc.GetViewers() == 0 {
			v.Idle = append(v.Idle, fc.GetRegion())
			continue
		}
		k, p := fc.GetConfigured(), fc.GetProposedOutcome()
		var taken, reserve []string
		for _, t := range k.GetTaken() {
			if t.GetViewers() > 0 {
				taken = append(taken, fmt.Sprintf("%s %d", t.GetRegion(), t.GetViewers()))
			}
		}
		for _, r := range fc.GetReserves() {
			if r.GetReserveKbps() > 0 {
				reserve = append(reserve, fmt.Sprintf("%s %.1f Mbps", r.GetRegion(), r.GetReserveKbps()/1000))
			}
		}
		v.Cities = append(v.Cities, FailureCity{Region: fc.GetRegion(), Viewers: fc.GetViewers(),
			Order: strings.Join(append(slices.Clone(fc.GetOrder()), "center"), " > "), Planned: plannedCell(k, fc.GetViewers()), Unplanned: k.GetUnplanned(),
			TakenBy: strings.Join(taken, ", "), Proposed: strings.Join(fc.GetProposed(), " > "), PPlanned: plannedCell(p, fc.GetViewers()),
			Reserve: strings.Join(reserve, ", "), ShortMbps: fmt.Sprintf("%.1f", fc.GetShortKbps()/1000)})
	}
	return v, nil
}

func plannedCell(o *pb.FailureOutcome, viewers int64) string {
	return fmt.Sprintf("%d of %d, %d at desired", o.GetPlanned(), viewers, o.GetAtDesired())
}
