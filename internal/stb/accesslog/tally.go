package accesslog

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// RunGap ends a run of answers: a client region whose STBs got no answer
// for this long starts a new run with its next one. A failover drill reads
// the start of the center's run for the drilled city as the moment the
// center took it over.
const RunGap = time.Second

// tally is what one scheduler answered to the STBs of one client region.
type tally struct {
	answered, failed atomic.Uint64
	runStart, last   atomic.Int64 // Unix ns
}

// tallies holds a tally per client region. Record reaches its tally through
// the series cache, so the hot path is three atomics; the map is walked only
// by Traffic.
type tallies struct {
	m sync.Map // client region -> *tally
}

// get returns region's tally, creating it on first use.
func (ts *tallies) get(region string) *tally {
	v, ok := ts.m.Load(region)
	if !ok {
		v, _ = ts.m.LoadOrStore(region, new(tally))
	}
	return v.(*tally)
}

func (t *tally) record(at time.Time, failed bool) {
	t.answered.Add(1)
	if failed {
		t.failed.Add(1)
	}
	now := at.UnixNano()
	if prev := t.last.Swap(now); now-prev > int64(RunGap) {
		t.runStart.Store(now)
	}
}

// RegionTraffic is what a scheduler answered to one region's STBs since it
// started. A drill takes the difference of two readings.
type RegionTraffic struct {
	ClientRegion string // "none": STBs in no coverage zone
	Answered     uint64
	Failed       uint64    // answered with an error: HTTP 5xx, DNS SERVFAIL
	RunStart     time.Time // first answer after a gap of RunGap or more
	Last         time.Time // the latest answer
}

// Traffic returns the answers by client region, sorted by region.
func (r *Recorder) Traffic() []RegionTraffic {
	var out []RegionTraffic
	r.tallies.m.Range(func(k, v any) bool {
		t := v.(*tally)
		out = append(out, RegionTraffic{
			ClientRegion: k.(string), Answered: t.answered.Load(), Failed: t.failed.Load(),
			RunStart: time.Unix(0, t.runStart.Load()), Last: time.Unix(0, t.last.Load()),
		})
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ClientRegion < out[j].ClientRegion })
	return out
}

// failedAnswer: the scheduler could not send the STB anywhere (a 4xx is the
// request's fault, NXDOMAIN/REFUSED the query's).
func failedAnswer(e *Entry) bool {
	if e.Proto == "dns" {
		return e.Status == 2 // SERVFAIL
	}
	return e.Status >= 500
}
