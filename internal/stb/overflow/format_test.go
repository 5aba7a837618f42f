package overflow

import (
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
)

func TestNum(t *testing.T) {
	cases := []struct {
		v    float64
		want string
	}{
		{0, "0"}, {0.25, "0.25"}, {12.345, "12.3"}, {72.00000000000001, "72"}, {99.5, "99.5"},
		{100, "100"}, {999.6, "1,000"}, {1250, "1,250"}, {1234567.8, "1,234,568"}, {-4321, "-4,321"},
	}
	for _, tc := range cases {
		if got := num(tc.v); got != tc.want {
			t.Errorf("num(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestBelowWithNoFigureLeft(t *testing.T) {
	// A reload that removed every capacity leaves a carried-over node with
	// no figure: nothing holds it.
	var f figures
	o := &topology.Overflow{BandwidthShare: 0.9, Resume: 0.8}
	if why, ok := f.below(o); !ok || why != "no threshold applies any more" {
		t.Errorf("below = %q, %v", why, ok)
	}
	f.status[figRPS] = unknown
	if _, ok := f.below(o); ok {
		t.Error("an unknown figure did not hold the node")
	}
}
