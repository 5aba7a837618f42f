package obs

import (
	"testing"

	"github.com/anysched/anysched/internal/wiring/version"
)

// Every daemon's /metrics carries anysched_build_info with the version
// schedctl version and status report, so an upgrade can be followed.
func TestBuildInfo(t *testing.T) {
	reg := NewRegistry()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "anysched_build_info" {
			continue
		}
		m := mf.GetMetric()[0]
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if m.GetGauge().GetValue() != 1 || labels["version"] != version.String() || labels["goversion"] == "" {
			t.Errorf("anysched_build_info: %v = %v", labels, m.GetGauge().GetValue())
		}
		if problems := LintMetrics(reg); len(problems) > 0 {
			t.Errorf("lint: %v", problems)
		}
		return
	}
	t.Fatal("no anysched_build_info")
}
