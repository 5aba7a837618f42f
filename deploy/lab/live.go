package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/anysched/anysched/internal/testbed/stbload"
)

// live gathers the per-second lines of every city's load generator and
// prints one line for each second (every `every` seconds) once every city
// has reported it: the STBs' success rate and who answered them, while the
// load runs.
type live struct {
	mu      sync.Mutex
	out     io.Writer
	every   int
	cities  []string
	seconds map[string][]stbload.Second // by city, by second
	reports map[string][]int            // by city, by second: generators that reported it
	gens    int                         // generators per city (its IPv4 and IPv6 STBs: 2)
	printed int                         // seconds printed (or skipped) so far
}

func newLive(out io.Writer, cities []string, every int) *live {
	return &live{out: out, every: max(every, 1), cities: cities, seconds: map[string][]stbload.Second{}, reports: map[string][]int{}, gens: 1}
}

func (lv *live) add(s stbload.Second) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	secs := lv.seconds[s.City]
	for len(secs) <= s.At {
		secs = append(secs, stbload.Second{City: s.City, At: len(secs)})
	}
	// Two generators of one city (its IPv4 and IPv6 STBs) add up.
	prev := secs[s.At]
	s.Requests, s.Failures = s.Requests+prev.Requests, s.Failures+prev.Failures
	if len(prev.AnsweredBy) > 0 {
		by := maps.Clone(prev.AnsweredBy)
		for inst, n := range s.AnsweredBy {
			by[inst] += n
		}
		s.AnsweredBy = by
	}
	secs[s.At] = s
	lv.seconds[s.City] = secs
	reps := lv.reports[s.City]
	for len(reps) <= s.At {
		reps = append(reps, 0)
	}
	reps[s.At]++
	lv.reports[s.City] = reps
	lv.printReady(false)
}

// flush prints the seconds not printed yet (the last ones may be partial).
func (lv *live) flush() {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	lv.printReady(true)
}

func (lv *live) printReady(all bool) {
	for {
		ready := true
		for _, c := range lv.cities {
			if reps := lv.reports[c]; len(reps) <= lv.printed || reps[lv.printed] < lv.gens {
				ready = false
			}
		}
		if !ready && !all {
			return
		}
		if !ready && !lv.anyAt(lv.printed) {
			return
		}
		if lv.printed%lv.every == 0 {
			fmt.Fprintln(lv.out, lv.line(lv.printed))
		}
		lv.printed++
	}
}

func (lv *live) anyAt(k int) bool {
	for _, c := range lv.cities {
		if len(lv.seconds[c]) > k {
			return true
		}
	}
	return false
}

// line: "  +12s  hefei 75 ok [hefei-1]   wuhu 74, 2 failed [center 60, wuhu-1 12]".
func (lv *live) line(k int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  +%3ds", k)
	for _, c := range lv.cities {
		var s stbload.Second
		if secs := lv.seconds[c]; len(secs) > k {
			s = secs[k]
		}
		fmt.Fprintf(&b, "   %s %d", c, s.Requests)
		if s.Failures > 0 {
			fmt.Fprintf(&b, ", %d failed", s.Failures)
		} else {
			b.WriteString(" ok")
		}
		b.WriteString(" [" + answeredBy(s) + "]")
	}
	return b.String()
}

// answeredBy lists who answered in a second: "hefei-1" when one did,
// "center 60, wuhu-1 14" when several did.
func answeredBy(s stbload.Second) string {
	insts := slices.Sorted(maps.Keys(s.AnsweredBy))
	if len(insts) == 1 {
		return insts[0]
	}
	parts := make([]string, len(insts))
	for i, in := range insts {
		parts[i] = fmt.Sprintf("%s %d", in, s.AnsweredBy[in])
	}
	return strings.Join(parts, ", ")
}

// timeline is what one city's STBs saw, second by second, as runs of
// seconds answered by the same schedulers: the drill from the STBs' side.
func (lv *live) timeline(city string) string {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	secs := lv.seconds[city]
	var b strings.Builder
	for i := 0; i < len(secs); {
		key := strings.Join(slices.Sorted(maps.Keys(secs[i].AnsweredBy)), "+")
		j, req, failed := i, 0, 0
		for ; j < len(secs) && strings.Join(slices.Sorted(maps.Keys(secs[j].AnsweredBy)), "+") == key; j++ {
			req, failed = req+secs[j].Requests, failed+secs[j].Failures
		}
		span := fmt.Sprintf("+%ds", i)
		if j-i > 1 {
			span = fmt.Sprintf("+%ds..+%ds", i, j-1)
		}
		who := strings.ReplaceAll(key, "+", " and ")
		if j-i == 1 { // one second: with the counts
			who = answeredBy(secs[i])
		}
		if who == "" {
			who = "nobody"
		}
		fmt.Fprintf(&b, "  %-12s %-28s %d requests, %d failed\n", span, who, req, failed)
		i = j
	}
	return b.String()
}
