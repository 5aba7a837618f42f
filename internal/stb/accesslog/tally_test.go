package accesslog

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestTraffic: answers are counted by the STB's region, errors apart, and
// a run of answers restarts after a silence of RunGap.
func TestTraffic(t *testing.T) {
	r := New(prometheus.NewRegistry(), nil, Options{})
	t0 := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	for _, e := range []Entry{
		{Time: at(0), Proto: "http", ClientRegion: "wuhu", Status: 302},
		{Time: at(400 * time.Millisecond), Proto: "http", ClientRegion: "wuhu", Status: 503},
		{Time: at(900 * time.Millisecond), Proto: "dns", ClientRegion: "wuhu", Status: 2},  // SERVFAIL
		{Time: at(950 * time.Millisecond), Proto: "dns", ClientRegion: "hefei", Status: 3}, // NXDOMAIN: the query's fault
		{Time: at(time.Second), Proto: "http", ClientRegion: "hefei", Status: 403},         // refused token: not a failure
		{Time: at(1500 * time.Millisecond), Proto: "http", ClientRegion: "", Status: 302},  // no zone
		{Time: at(3 * time.Second), Proto: "http", ClientRegion: "wuhu", Status: 302},      // after a silence: a new run
		{Time: at(3*time.Second + 500*time.Millisecond), Proto: "http", ClientRegion: "wuhu", Status: 302},
	} {
		r.Record(e)
	}
	got := r.Traffic()
	want := []RegionTraffic{
		{ClientRegion: "hefei", Answered: 2, Failed: 0, RunStart: at(950 * time.Millisecond), Last: at(time.Second)},
		{ClientRegion: "none", Answered: 1, Failed: 0, RunStart: at(1500 * time.Millisecond), Last: at(1500 * time.Millisecond)},
		{ClientRegion: "wuhu", Answered: 5, Failed: 2, RunStart: at(3 * time.Second), Last: at(3*time.Second + 500*time.Millisecond)},
	}
	if len(got) != len(want) {
		t.Fatalf("Traffic() = %+v", got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ClientRegion != w.ClientRegion || g.Answered != w.Answered || g.Failed != w.Failed || !g.RunStart.Equal(w.RunStart) || !g.Last.Equal(w.Last) {
			t.Errorf("region %d: got %+v, want %+v", i, g, w)
		}
	}
}
