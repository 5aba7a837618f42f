package steer_test

import (
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/stb/balance"
	"github.com/anysched/anysched/internal/stb/steer"
)

// TestBuilderRebuildsOnChange: the builder keeps the engine while nothing
// it is built from changed, and builds anew when the snapshot, the
// availability, the balance policy or the overflow state changes, on every
// call while balance tables follow load, and while a server ramps up.
func TestBuilderRebuildsOnChange(t *testing.T) {
	s := withSelection(t, "nearest")
	t0 := time.Unix(1_800_000_000, 0)
	up := func() *avail.Availability {
		av := &avail.Availability{Figures: make([]avail.Figures, len(s.Servers)), Available: make([]bool, len(s.Servers)), Why: make([]string, len(s.Servers))}
		for i := range av.Available {
			av.Available[i] = true
		}
		return av
	}
	var b steer.Builder
	build := func(what string, in steer.Inputs, want bool) *steer.Engine {
		t.Helper()
		eng, err := b.Build(s, in)
		if err != nil {
			t.Fatal(err)
		}
		if (eng != nil) != want {
			t.Fatalf("%s: built %v, want %v", what, eng != nil, want)
		}
		return eng
	}
	in := steer.Inputs{Avail: up(), Balance: balance.DefaultConfig(), Now: t0}
	build("first", in, true)
	in.Avail, in.Now = up(), t0.Add(time.Second) // equal, not the same
	build("nothing changed", in, false)

	in.Avail.Available[0] = false
	build("a server went down", in, true)
	build("still down", in, false)

	in.Balance.Weights = map[string]float64{s.Servers[1].Name: 0}
	build("a weight changed", in, true)
	build("same weights", in, false)

	in.Overflow = &overState{}
	build("overflow state", in, true)
	build("same overflow state", in, false)

	// Slow start: the server back at +10s ramps for 100 s; every call
	// rebuilds until then.
	in.Balance.SlowStart = balance.SlowStart{Window: 100 * time.Second}
	build("slow start on", in, true)
	in.Avail, in.Now = up(), t0.Add(10*time.Second)
	if eng := build("server back", in, true); !eng.RampingUntil().Equal(t0.Add(110 * time.Second)) {
		t.Fatalf("ramping until %v, want +110s", eng.RampingUntil())
	}
	in.Now = t0.Add(50 * time.Second)
	build("ramping", in, true)
	in.Now = t0.Add(111 * time.Second)
	build("ramp over", in, false)

	in.Balance.Key.By = balance.KeyPath
	build("policy changed", in, true)
	build("same policy", in, false)

	// Another snapshot: built anew, and so is every call while a service's
	// tables follow load.
	s = withSelection(t, "swrr")
	in.Avail = up()
	build("new snapshot", in, true)
	build("swrr tables", in, true)
}
