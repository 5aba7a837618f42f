package balance

import (
	"math"
	"testing"
	"time"
)

func TestQualityFactor(t *testing.T) {
	o := AdaptiveOptions{}
	for _, tc := range []struct {
		name string
		l    Load
		want float64
	}{
		{"perfect", Load{}, 1},
		{"RTT at the reference halves", Load{RTT: 100 * time.Millisecond}, 0.5},
		{"10% loss", Load{Loss: 0.1}, math.Pow(0.9, 10)},
		{"half CPU", Load{CPU: 0.5}, 0.5},
		{"bandwidth is the busier", Load{CPU: 0.2, BandwidthMbps: 750, CapacityMbps: 1000}, 0.25},
		{"unknown capacity ignores bandwidth", Load{BandwidthMbps: 750}, 1},
		{"everything lost stays positive", Load{Loss: 1}, 1e-9},
	} {
		if got := QualityFactor(tc.l, o); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAdaptiveWeightsBoundsAndRelativity(t *testing.T) {
	ss := servers(100, 100, 100, 100)
	// A uniformly slow node keeps its configured weights.
	loads := healthy(4)
	for i := range loads {
		loads[i].RTT = 80 * time.Millisecond
		loads[i].CPU = 0.6
	}
	var w []float64
	for range 50 {
		w = AdaptiveWeights(ss, loads, w, AdaptiveOptions{})
	}
	for i, v := range w {
		if math.Abs(v-100) > 1e-9 {
			t.Errorf("uniform node: weight %d = %v, want 100", i, v)
		}
	}
	// One dreadful server, one excellent: both end at their bounds, never
	// beyond, however long the condition lasts.
	loads[0] = Load{Healthy: true, Loss: 0.5, CPU: 0.99, RTT: time.Second}
	loads[1] = Load{Healthy: true}
	w = nil
	o := AdaptiveOptions{Min: 0.2, Max: 1.3}
	for range 200 {
		w = AdaptiveWeights(ss, loads, w, o)
		for i, v := range w {
			if v < 20-1e-9 || v > 130+1e-9 {
				t.Fatalf("weight %d = %v leaves [20, 130]", i, v)
			}
		}
	}
	if math.Abs(w[0]-20) > 1e-6 || math.Abs(w[1]-130) > 1e-6 {
		t.Errorf("converged to %v, want 20 and 130 at the bounds", w[:2])
	}
	// Unhealthy: 0.
	loads[2].Healthy = false
	if w = AdaptiveWeights(ss, loads, w, o); w[2] != 0 {
		t.Errorf("unhealthy weight %v", w[2])
	}
}

// TestAdaptiveOneProbeCannotSwing: a single catastrophic report moves a
// weight only Alpha of the way to its target; repeated, it converges.
func TestAdaptiveOneProbeCannotSwing(t *testing.T) {
	ss := servers(100, 100)
	good := healthy(2)
	o := AdaptiveOptions{Alpha: 0.2}
	w := AdaptiveWeights(ss, good, nil, o)
	bad := healthy(2)
	bad[0].Loss = 0.9 // one probe saw everything lost
	w1 := AdaptiveWeights(ss, bad, w, o)
	// Target: min bound 10 (quality ~0 against a mean of ~0.5, clamped).
	if want := 100 + 0.2*(10-100); math.Abs(w1[0]-want) > 1e-9 {
		t.Errorf("after one bad probe: %v, want %v", w1[0], want)
	}
	// The next good report starts the way back.
	w2 := AdaptiveWeights(ss, good, w1, o)
	if !(w2[0] > w1[0] && w2[0] < 100) {
		t.Errorf("recovery step: %v -> %v", w1[0], w2[0])
	}
	// Ten more bad reports get within 90% of the way down.
	w = w1
	for range 10 {
		w = AdaptiveWeights(ss, bad, w, o)
	}
	if w[0] > 10+0.1*90 {
		t.Errorf("after 11 bad reports: %v", w[0])
	}
}

func TestAdaptiveOptionsValidate(t *testing.T) {
	for _, o := range []AdaptiveOptions{{Alpha: 1.5}, {Min: 2, Max: 1.5}, {Min: 1.2}, {Max: 0.8}} {
		if o.validate() == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if err := (AdaptiveOptions{Min: 0.5, Max: 2, Alpha: 1}).validate(); err != nil {
		t.Error(err)
	}
}
