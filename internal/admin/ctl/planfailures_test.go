package ctl

import (
	"math"
	"testing"

	pb "github.com/anysched/anysched/proto/anysched/v1"
)

func TestPlanFailures(t *testing.T) {
	resp := &pb.PlanFailuresResponse{Revision: 7, Stale: []string{"bozhou"}, Cities: []*pb.FailurePlan{
		{Region: "hefei", Viewers: 40, Order: []string{"wuhu"},
			Configured: &pb.FailureOutcome{Planned: 30, Unplanned: 10, AtDesired: 6, MeanKbps: 1250, HostsAtDesired: 1, Gap: 0.004,
				Taken: []*pb.FailureTake{{Region: "wuhu", Viewers: 30, Kbps: 37500}}},
			Proposed:        []string{"feixi", "wuhu"},
			ProposedOutcome: &pb.FailureOutcome{Planned: 40, AtDesired: 40, MeanKbps: 5000, HostsAtDesired: math.NaN(), Gap: math.NaN()},
			Reserves:        []*pb.FailureReserve{{Region: "feixi", SpareKbps: 2e6, ReserveKbps: 2e5}, {Region: "wuhu", SpareKbps: 37500}}},
		{Region: "wuhu", Configured: &pb.FailureOutcome{}, ProposedOutcome: &pb.FailureOutcome{}},
	}}
	runCases(t, []cmdCase{
		{
			name: "table", args: []string{"plan", "failures", "--region", "hefei", "--region", "wuhu", "--budget", "500ms"},
			rpc: map[string]handler{"PlanFailures": reply(resp)},
			want: "the loss of each city on topology revision 7, its configured fallback order (the center plans its viewers on what the hosts' planners leave):\n" +
				"CITY   VIEWERS  FALLBACK       PLANNED  AT_DESIRED  MEAN_KBPS  UNPLANNED  TAKEN_BY  HOSTS_AT_DESIRED  GAP\n" +
				"hefei  40       wuhu > center  30       6 (20%)     1250       10         wuhu 30   100%              0.40%\n" +
				"\n" +
				"proposed: the order and reserves of a plan where the nearest cities may serve too (RESERVE: capacity to hold free for the city's viewers at their desired bitrates):\n" +
				"CITY   PROPOSED      PLANNED  AT_DESIRED  MEAN_KBPS  UNPLANNED  RESERVE                                SHORT\n" +
				"hefei  feixi > wuhu  40       40 (100%)   5000       0          feixi 200.0 Mbps of 2000.0 Mbps spare  0\n" +
				"no viewers known (nothing to plan): wuhu\n" +
				"warning: no plan state newer than a minute from bozhou: their viewers are as last published, or none\n",
			sent: []call{{method: "PlanFailures", req: &pb.PlanFailuresRequest{Regions: []string{"hefei", "wuhu"}, BudgetMs: 500}}},
		},
		{name: "no subcommand", args: []string{"plan"}, wantErr: "schedctl plan: plan what? failures", usage: true},
		{name: "unknown subcommand", args: []string{"plan", "outages"}, wantErr: `schedctl plan: unknown plan command "outages": want failures`, usage: true},
		{name: "budget", args: []string{"plan", "failures", "--budget", "11s"}, wantErr: "schedctl plan: --budget 11s: want 1ms to 10s", usage: true},
	})
}
