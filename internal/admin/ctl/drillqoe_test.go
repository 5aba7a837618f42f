package ctl

import (
	"fmt"
	"testing"

	"github.com/anysched/anysched/internal/admin/statusview"
)

// TestDrillQoERow: a phase's cells say "-" where it has nothing to say.
func TestDrillQoERow(t *testing.T) {
	planned := statusview.QoEState{Planners: []string{"wuhu-1"}, Sessions: 10, Planned: 8, Fallback: 2, Starved: 1, Objective: 20.25, AtDesired: 0.875}
	for _, tt := range []struct {
		name  string
		phase statusview.QoEPhase
		want  string
	}{
		{"not reached", statusview.QoEPhase{Phase: "after", Who: "-"}, "[  after - - - - - - - - -]"},
		{"planned", statusview.QoEPhase{Phase: "before", Seen: true, Who: "wuhu-1", State: planned, Switches: 4, Drops: 1, Plans: 1},
			"[  before 10 20.2 87.5% 2 1 4 1 1 wuhu-1]"},
		{"safe mode", statusview.QoEPhase{Phase: "before", Seen: true, Who: "wuhu-1", State: statusview.QoEState{Planners: []string{"wuhu-1"}, Sessions: 10, Planned: 10, AtDesired: 1, SafeMode: true}, Plans: 1},
			"[  before 10 0.0 100.0% 0 0 0 0 1 wuhu-1 [safe mode]]"},
		{"nothing planned", statusview.QoEPhase{Phase: "during", Seen: true, Who: "center-1", State: statusview.QoEState{Planners: []string{"center-1"}, Sessions: 3, Fallback: 3}},
			"[  during 3 0.0 - 3 0 - - 0 center-1]"},
		{"nobody plans", statusview.QoEPhase{Phase: "during", Seen: true, NoPlan: true, Who: statusview.NoCenterPlan, Switches: 7, Drops: 2, Plans: 1},
			"[  during - - - - - 7 2 1 " + statusview.NoCenterPlan + "]"},
	} {
		if got := fmt.Sprint(drillQoERow(tt.phase)); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}
