package drillwatch

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/anysched/anysched/internal/admin/statusview"
	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// Centers follows the central schedulers' answers to the STBs of a city
// whose route is withdrawn (a drill, a rollout undone): when a center took
// them over, when the last one gave them back, and how many they answered
// (with an error or not). The center the caller talks to counts live, the
// others as of their last registration (every 2 s). Only answers are seen:
// a request lost in flight while routes change is seen by the STB alone.
type Centers struct {
	region   string
	start    time.Time
	base     map[string]*pb.RegionTraffic // by center, at the start
	cur      map[string]*pb.RegionTraffic // by center, the centers that answered the city since
	tookOver time.Time
	lastSeen time.Time // when a center's last answer last moved
}

// NewCenters follows the centers' answers to region's STBs since start,
// counted from base (by center; nil: from nothing).
func NewCenters(region string, start time.Time, base map[string]*pb.RegionTraffic) *Centers {
	return &Centers{region: region, start: start, base: base}
}

// Observe takes the province's status at now; the event is the first
// center's takeover.
func (c *Centers) Observe(st *pb.StatusResponse, now time.Time) []Event {
	return c.observe(st, now, nil)
}

// Answering is, by center, the latest count of each center that answered
// the city since the start.
func (c *Centers) Answering() map[string]*pb.RegionTraffic { return c.cur }

// TookOver is when the first center took the city over; zero: none yet.
func (c *Centers) TookOver() time.Time { return c.tookOver }

func (c *Centers) observe(st *pb.StatusResponse, now time.Time, out []Event) []Event {
	if c.cur == nil {
		c.cur = map[string]*pb.RegionTraffic{}
	}
	for id, t := range statusview.CenterTraffic(st, c.region) {
		if t.GetAnswered() <= c.base[id].GetAnswered() {
			continue
		}
		if old := c.cur[id]; old == nil || !old.GetLast().AsTime().Equal(t.GetLast().AsTime()) {
			c.lastSeen = now
		}
		c.cur[id] = t
		took := t.GetRunStart().AsTime()
		if took.Before(c.start) { // it was answering the city already
			took = c.start
		}
		if c.tookOver.IsZero() {
			out = append(out, Event{At: took, Text: fmt.Sprintf("the center (%s) answered its first %s STB: it took the city over", id, c.region)})
		}
		if c.tookOver.IsZero() || took.Before(c.tookOver) {
			c.tookOver = took
		}
	}
	return out
}

// settled: the city announces again (since back) and no center has
// answered its STBs for Quiet; or nothing came for answersMax.
func (c *Centers) settled(now, back time.Time) bool {
	if back.IsZero() {
		return false
	}
	if len(c.cur) == 0 {
		return now.Sub(back) > Quiet
	}
	return now.Sub(c.lastSeen) > Quiet || now.Sub(back) > answersMax
}

// Takeover is what the centers answered a drilled city's STBs since the
// drill started.
type Takeover struct {
	Region string
	// Centers is each center that answered, by id.
	Centers          []CenterAnswers
	Answered, Failed uint64
	From, Last       time.Time // the earliest takeover, the latest answer
}

// CenterAnswers is what one center answered the city's STBs.
type CenterAnswers struct {
	ID       string
	Answered uint64
}

// Takeover is what the centers answered the city's STBs since the start.
func (c *Centers) Takeover() Takeover {
	t := Takeover{Region: c.region, From: c.tookOver}
	for _, id := range slices.Sorted(maps.Keys(c.cur)) {
		cur, b := c.cur[id], c.base[id]
		n := cur.GetAnswered() - b.GetAnswered()
		t.Answered, t.Failed = t.Answered+n, t.Failed+cur.GetFailed()-b.GetFailed()
		if l := cur.GetLast().AsTime(); l.After(t.Last) {
			t.Last = l
		}
		t.Centers = append(t.Centers, CenterAnswers{ID: id, Answered: n})
	}
	return t
}

// GaveBack is the event of the city taking its traffic back: the last
// answer of a center to its STBs. Only when a center answered any.
func (t Takeover) GaveBack() Event {
	return Event{At: t.Last, Text: fmt.Sprintf("the last answer of a center to a %s STB: the city took its traffic back", t.Region)}
}
