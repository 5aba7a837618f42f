package docs_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology/topogen"
)

// TestCapacityFiguresAreBenchmarks: the measured figures capacity.md quotes
// are ones docs/benchmarks.md states, as for README.md's.
func TestCapacityFiguresAreBenchmarks(t *testing.T) {
	checkMeasured(t, "capacity.md", read(t, "capacity.md"))
}

// TestCapacitySplitTable: capacity.md's table of the sample province is
// the census table and topogen.AnhuiSplit of the design's set-top boxes
// and prime-time viewers, row by row.
func TestCapacitySplitTable(t *testing.T) {
	pop := topogen.AnhuiPopulation()
	stbs := topogen.AnhuiSplit(topogen.ProvinceSTBs)
	viewers := topogen.AnhuiSplit(topogen.PrimeTimeViewers)
	var want []string
	residents := 0
	for i, p := range pop {
		want = append(want, row(p.City, p.Residents, stbs[i].N, viewers[i].N))
		residents += p.Residents
	}
	want = append(want, row("province", residents, topogen.ProvinceSTBs, topogen.PrimeTimeViewers))
	var got []string
	for _, line := range strings.Split(block(t, read(t, "capacity.md"), "split"), "\n") {
		if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| city ") {
			got = append(got, line)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("capacity.md's split table is not topogen.AnhuiSplit's; want:\n%s", strings.Join(want, "\n"))
	}
}

func row(city string, n ...int) string {
	cells := []string{city}
	for _, v := range n {
		cells = append(cells, thousands(v))
	}
	return "| " + strings.Join(cells, " | ") + " |"
}

// thousands writes n with commas between groups of three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
