package drillwatch

import (
	"testing"
	"time"

	pb "github.com/anysched/anysched/proto/anysched/v1"
)

var t0 = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)

// at is t0 + s seconds.
func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// settled: back, and no new answer for 2.5 s (or 15 s after back at most);
// without any answer, 2.5 s after back.
func TestTakeoverSettled(t *testing.T) {
	for _, tc := range []struct {
		name           string
		answered       bool
		lastSeen, back float64 // seconds after t0; back < 0: not back
		now            float64
		want           bool
	}{
		{"not back", true, 1, -1, 100, false},
		{"answers stopped", true, 4, 3, 6.6, true},
		{"answers just stopped", true, 4, 3, 6.5, false},
		{"answers go on", true, 17.9, 3, 18.1, true},
		{"answers go on, not 15 s", true, 17.9, 3, 17.9, false},
		{"no answers", false, 0, 3, 5.6, true},
		{"no answers yet", false, 0, 3, 5.4, false},
	} {
		f := &Centers{lastSeen: at(tc.lastSeen)}
		if tc.answered {
			f.cur = map[string]*pb.RegionTraffic{"center-1": {}}
		}
		var back time.Time
		if tc.back >= 0 {
			back = at(tc.back)
		}
		if got := f.settled(at(tc.now), back); got != tc.want {
			t.Errorf("%s: settled = %v, want %v", tc.name, got, tc.want)
		}
	}
}
