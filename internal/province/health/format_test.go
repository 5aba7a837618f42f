package health_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/testbed/logtest"
)

// TestNewerReportRefused: a verdict a newer checker wrote in a format
// this build does not read counts as no verdict of that checker (not as
// the fields this build knows of it), and the merger says so once.
func TestNewerReportRefused(t *testing.T) {
	s := snap(t)
	b := s.Servers[1].Name
	rec := logtest.New()
	h := newHarnessLogging(t, health.MergerOptions{Rule: health.MergeMajority, Grace: time.Minute}, rec.Logger())
	p1, _ := h.publisher("c1", 5*time.Second)
	p2, _ := h.publisher("c2", 5*time.Second)
	p1.Publish(report(b, "c1", false))
	p2.Publish(report(b, "c2", false))
	h.eventually("b down by both checkers", 5*time.Second, s, func(av *avail.Availability) bool {
		return !av.Available[1] && strings.Contains(av.Why[1], "down by 2 of 2 checkers")
	})
	// c1, upgraded, says b is up in a format this build does not know:
	// read for what it knows, b would be down by 1 of 2 and available.
	newer := report(b, "c1", true)
	newer.Format = health.ReportFormat + 1
	p1.Publish(newer)
	h.eventually("c1's newer verdict refused", 5*time.Second, s, func(av *avail.Availability) bool {
		return !av.Available[1] && strings.Contains(av.Why[1], "down by 1 of 1 checker")
	})
	// Once per checker, however many of its verdicts.
	p1.Publish(newer)
	if got := rec.Containing(slog.LevelWarn, "verdicts in a newer format"); len(got) != 1 {
		t.Errorf("the refusal said %d times, want once: %+v", len(got), got)
	}
}
