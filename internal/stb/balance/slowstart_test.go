package balance

import (
	"math"
	"testing"
	"time"
)

func TestSlowStartRampShape(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s SlowStart, d time.Duration) float64 { return s.Factor(t0, t0.Add(d)) }
	win := 60 * time.Second
	for _, tc := range []struct {
		name string
		s    SlowStart
		at   time.Duration
		want float64
	}{
		{"linear start clamps to min share", SlowStart{Window: win}, 0, 0.1},
		{"linear 1s is still min share", SlowStart{Window: win}, time.Second, 0.1},
		{"linear at 9s is above the floor", SlowStart{Window: win}, 9 * time.Second, 0.15},
		{"linear half way", SlowStart{Window: win}, 30 * time.Second, 0.5},
		{"linear at the end", SlowStart{Window: win}, 60 * time.Second, 1},
		{"after the window", SlowStart{Window: win}, time.Hour, 1},
		{"aggression 2 is a square root", SlowStart{Window: win, Aggression: 2}, 15 * time.Second, 0.5},
		{"aggression 0.5 is a square", SlowStart{Window: win, Aggression: 0.5}, 30 * time.Second, 0.25},
		{"aggression 0.5 holds the floor longer", SlowStart{Window: win, Aggression: 0.5}, 18 * time.Second, 0.1},
		{"custom min share", SlowStart{Window: win, MinShare: 0.3}, 6 * time.Second, 0.3},
		{"disabled", SlowStart{}, 0, 1},
	} {
		if got := at(tc.s, tc.at); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: factor %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := (SlowStart{Window: win}).Factor(time.Time{}, t0); got != 1 {
		t.Errorf("zero since (long in service): %v", got)
	}
	// The ramp never falls and ends at exactly 1; a higher aggression is
	// never below a lower one.
	for _, aggr := range []float64{0.5, 1, 2, 4} {
		s := SlowStart{Window: win, Aggression: aggr}
		hi := SlowStart{Window: win, Aggression: aggr * 2}
		last := 0.0
		for d := time.Duration(0); d <= win; d += 250 * time.Millisecond {
			f := at(s, d)
			if f < last || f < 0.1 || f > 1 {
				t.Fatalf("aggression %v at %v: %v after %v", aggr, d, f, last)
			}
			if at(hi, d) < f-1e-12 {
				t.Fatalf("aggression %v below %v at %v", aggr*2, aggr, d)
			}
			last = f
		}
		if last != 1 {
			t.Errorf("aggression %v ends at %v", aggr, last)
		}
	}
}

func TestSlowStartEnds(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := SlowStart{Window: time.Minute}
	if got := s.Ends(t0, t0.Add(10*time.Second)); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("ends %v", got)
	}
	if got := s.Ends(t0, t0.Add(time.Minute)); !got.IsZero() {
		t.Errorf("ended ramp still ends at %v", got)
	}
}

// TestSlowStartSWRRShare: a server a quarter of the way through a linear
// ramp gets a quarter of its weight, so 1 : 0.25 against an equal peer, and
// the table says until when to keep rebuilding.
func TestSlowStartSWRRShare(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	ss := servers(100, 100)
	loads := healthy(2)
	loads[1].Since = now.Add(-15 * time.Second)
	p := mustSWRR(t, ss, loads, SWRROptions{SlowStart: SlowStart{Window: time.Minute}, Now: now})
	n := 0
	for range 1000 {
		if p.Pick(0, 0) == 1 {
			n++
		}
	}
	if n != 200 { // 25 / 125 of 1000, exactly: swrr is periodic
		t.Errorf("ramping server took %d of 1000, want 200", n)
	}
	if got := p.RampingUntil(); !got.Equal(loads[1].Since.Add(time.Minute)) {
		t.Errorf("ramping until %v", got)
	}
	// The same in chash's bound and p2c's weight.
	c := mustCHash(t, ss, loads, CHashOptions{Epsilon: 0.25, SlowStart: SlowStart{Window: time.Minute}, Now: now})
	if c.RampingUntil().IsZero() || c.effective[1] != 25 {
		t.Errorf("chash: effective %v", c.effective)
	}
	q := mustP2C(t, ss, loads, P2COptions{SlowStart: SlowStart{Window: time.Minute}, Now: now})
	if q.RampingUntil().IsZero() || q.peers[1].eff != 25 {
		t.Errorf("p2c: effective %v", q.peers[1].eff)
	}
}
