package ctl

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/statusview"
	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// takeover follows, through Status, the central schedulers' answers to the
// STBs of a drilled city: when a center took them over, when the last one
// gave them back, and how many they answered (with an error or not). The
// center schedctl talks to counts live, the others as of their last
// registration (every 2 s). Only answers are seen: a request lost in flight
// while routes change is seen by the STB alone.
type takeover struct {
	region   string
	start    time.Time
	base     map[string]*pb.RegionTraffic // by center, at the start
	out      io.Writer
	clock    clock
	cur      map[string]*pb.RegionTraffic // by center, the centers that answered the city since
	tookOver time.Time
	lastSeen time.Time // when a center's last answer last moved
}

// takeoverQuiet: the city is back when no center has answered its STBs for
// this long (more than the 2 s between two registrations).
const takeoverQuiet = 2500 * time.Millisecond

func (f *takeover) observe(st *pb.StatusResponse) {
	if f.cur == nil {
		f.cur = map[string]*pb.RegionTraffic{}
	}
	for id, t := range statusview.CenterTraffic(st, f.region) {
		if t.GetAnswered() <= f.base[id].GetAnswered() {
			continue
		}
		if old := f.cur[id]; old == nil || !old.GetLast().AsTime().Equal(t.GetLast().AsTime()) {
			f.lastSeen = f.clock.Now()
		}
		f.cur[id] = t
		took := t.GetRunStart().AsTime()
		if took.Before(f.start) { // it was answering the city already
			took = f.start
		}
		if f.tookOver.IsZero() {
			fmt.Fprintf(f.out, "  +%5.1fs  the center (%s) answered its first %s STB: it took the city over\n", took.Sub(f.start).Seconds(), id, f.region)
		}
		if f.tookOver.IsZero() || took.Before(f.tookOver) {
			f.tookOver = took
		}
	}
}

// settled: the city announces again (since back) and no center has
// answered its STBs for takeoverQuiet; or nothing came for 15 s.
func (f *takeover) settled(back time.Time) bool {
	if back.IsZero() {
		return false
	}
	if len(f.cur) == 0 {
		return since(f.clock, back) > takeoverQuiet
	}
	return since(f.clock, f.lastSeen) > takeoverQuiet || since(f.clock, back) > 15*time.Second
}

func (f *takeover) summary() {
	if len(f.cur) == 0 {
		fmt.Fprintf(f.out, "drill done: no center answered any request of %s's STBs: there was no traffic from the city\n", f.region)
		return
	}
	var answered, failed uint64
	var last time.Time
	var each []string
	ids := slices.Sorted(maps.Keys(f.cur))
	for _, id := range ids {
		t, b := f.cur[id], f.base[id]
		n := t.GetAnswered() - b.GetAnswered()
		answered, failed = answered+n, failed+t.GetFailed()-b.GetFailed()
		if l := t.GetLast().AsTime(); l.After(last) {
			last = l
		}
		each = append(each, fmt.Sprintf("%s %d", id, n))
	}
	who := "the center (" + ids[0] + ")"
	if len(each) > 1 {
		who = "the centers (" + strings.Join(each, ", ") + ")"
	}
	fmt.Fprintf(f.out, "  +%5.1fs  the last answer of a center to a %s STB: the city took its traffic back\n", last.Sub(f.start).Seconds(), f.region)
	fmt.Fprintf(f.out, "drill done: %s answered %d requests of %s's STBs from +%.1fs to +%.1fs, %d of them with an error; requests lost in flight while routes changed are seen only by the STBs (bin/lab load counts them)\n",
		who, answered, f.region, f.tookOver.Sub(f.start).Seconds(), last.Sub(f.start).Seconds(), failed)
}
