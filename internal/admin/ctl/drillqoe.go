package ctl

import (
	"fmt"
	"io"
	"strconv"

	"github.com/anysched/anysched/internal/admin/statusview"
)

// writeDrillQoE prints the QoE of a drilled city's viewers by phase: each
// phase's last plans (sessions, objective, share at the desired bitrate,
// fallback and starved sessions), the switches and drops of every plan
// made in it, and who planned. Who goes last: it may be a sentence.
func writeDrillQoE(w io.Writer, region string, q *statusview.QoEWatch) error {
	if !q.Planned() {
		_, err := fmt.Fprintf(w, "qoe: no plan of %s's viewers seen (no selection: qoe service there, or its schedulers report none)\n", region)
		return err
	}
	fmt.Fprintf(w, "qoe of %s's viewers (each phase's last plans; switches and drops summed over the plans made in it):\n", region)
	t := newTable("  PHASE", "SESSIONS", "OBJECTIVE", "AT_DESIRED", "FALLBACK", "STARVED", "SWITCHES", "DROPS", "PLANS", "PLANNED_BY")
	for _, p := range q.Phases() {
		t.add(drillQoERow(p)...)
	}
	return writeTables(w, t)
}

// drillQoERow is a phase's cells; "-" where the phase has nothing to say
// (not reached, nobody planning, no plan made in it).
func drillQoERow(p statusview.QoEPhase) []any {
	s := p.State
	row := []any{"  " + p.Phase, "-", "-", "-", "-", "-", "-", "-", "-", p.Who}
	if p.Seen && !p.NoPlan {
		row[1], row[2] = s.Sessions, strconv.FormatFloat(s.Objective, 'f', 1, 64)
		if s.Planned > 0 {
			row[3] = fmt.Sprintf("%.1f%%", 100*s.AtDesired)
		}
		row[4], row[5] = s.Fallback, s.Starved
		if s.SafeMode {
			row[9] = p.Who + " [safe mode]"
		}
	}
	if p.Plans > 0 {
		row[6], row[7] = p.Switches, p.Drops
	}
	if p.Seen {
		row[8] = p.Plans
	}
	return row
}
