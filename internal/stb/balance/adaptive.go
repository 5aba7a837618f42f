package balance

import (
	"fmt"
	"math"
	"time"
)

// AdaptiveOptions configure QoS-adaptive weights (the feedback loop of the Go edge load-balancing write-up).
type AdaptiveOptions struct {
	// Enabled turns adaptation of swrr's weights on in a Table
	// (AdaptiveWeights itself always adapts). chash keeps configured weights
	// (its ring would move with them) and p2c reads the loads directly.
	Enabled bool `yaml:"enabled" json:"enabled"`
	// RTTRef is the latency at which the latency factor halves:
	// 1 / (1 + RTT/RTTRef). 0 means 100ms (the write-up's constant).
	RTTRef time.Duration `yaml:"rtt_ref" json:"rtt_ref"`
	// LossExponent k makes the loss factor (1-loss)^k. The write-up uses k = 1,
	// which barely notices 5% loss; TCP video stalls long before that, so
	// 0 means 10 (1% loss -> 0.90, 5% -> 0.60, 10% -> 0.35).
	LossExponent float64 `yaml:"loss_exponent" json:"loss_exponent"`
	// LoadExponent k makes the load factor (1-u)^k, u the busiest of CPU,
	// bandwidth/capacity; 0 means 1 (weight proportional to headroom).
	LoadExponent float64 `yaml:"load_exponent" json:"load_exponent"`
	// Alpha is the smoothing step: each update moves a weight Alpha of the
	// way to its target, so one bad probe moves it at most Alpha of the
	// range. 0 means 0.2 (a step response reaches 90% in ten updates).
	Alpha float64 `yaml:"alpha" json:"alpha"`
	// Min and Max bound every adapted weight to [Min, Max] x its configured
	// weight. 0 means 0.1 and 1.5.
	Min float64 `yaml:"min" json:"min"`
	Max float64 `yaml:"max" json:"max"`
}

func (o AdaptiveOptions) withDefaults() AdaptiveOptions {
	if o.RTTRef <= 0 {
		o.RTTRef = 100 * time.Millisecond
	}
	if o.LossExponent <= 0 {
		o.LossExponent = 10
	}
	if o.LoadExponent <= 0 {
		o.LoadExponent = 1
	}
	if o.Alpha <= 0 {
		o.Alpha = 0.2
	}
	if o.Min <= 0 {
		o.Min = 0.1
	}
	if o.Max <= 0 {
		o.Max = 1.5
	}
	return o
}

// validate checks the options; Config.Validate reports its error under
// the field "adaptive".
func (o AdaptiveOptions) validate() error {
	switch {
	case o.Alpha > 1:
		return fmt.Errorf("alpha %v is above 1", o.Alpha)
	case o.Min > 0 && o.Max > 0 && o.Min > o.Max:
		return fmt.Errorf("min %v is above max %v", o.Min, o.Max)
	case o.Min > 1 || (o.Max > 0 && o.Max < 1):
		return fmt.Errorf("bounds [%v, %v] must contain 1 (the configured weight)", o.Min, o.Max)
	}
	return nil
}

// QualityFactor is a server's quality from its health figures, in (0, 1]:
// the product of the latency, loss and load factors. An unmeasured figure
// (RTT 0, no capacity) counts as perfect.
func QualityFactor(l Load, o AdaptiveOptions) float64 {
	o = o.withDefaults()
	lat := 1 / (1 + float64(l.RTT)/float64(o.RTTRef))
	loss := math.Pow(1-min(max(l.Loss, 0), 1), o.LossExponent)
	u := max(l.CPU, 0)
	if l.CapacityMbps > 0 {
		u = max(u, l.BandwidthMbps/l.CapacityMbps)
	}
	load := math.Pow(1-min(u, 1), o.LoadExponent)
	return max(lat*loss*load, 1e-9)
}

// AdaptiveWeights returns each server's adapted weight: its configured weight
// scaled by its quality relative to the mean quality of the node's healthy
// servers (so a uniformly slow node keeps its weights, and a server better
// than its peers gains), moved only Alpha of the way from prev (the weights
// this returned last time; nil or a non-positive entry: the configured
// weight), and bounded to [Min, Max] x the configured weight. Unhealthy
// servers get 0 (and restart from their configured weight when they return,
// when slow start takes over). Call it off the hot path on every health
// update and keep the result for the next call.
func AdaptiveWeights(servers []Server, loads []Load, prev []float64, o AdaptiveOptions) []float64 {
	o = o.withDefaults()
	out := make([]float64, len(servers))
	q := make([]float64, len(servers))
	sum, n := 0.0, 0
	for i := range servers {
		l := loadAt(loads, i)
		if !l.Healthy || servers[i].Weight <= 0 {
			continue
		}
		q[i] = QualityFactor(l, o)
		sum += q[i]
		n++
	}
	if n == 0 {
		return out
	}
	mean := sum / float64(n)
	for i := range servers {
		w := servers[i].Weight
		if q[i] == 0 {
			continue
		}
		lo, hi := o.Min*w, o.Max*w
		target := min(max(w*q[i]/mean, lo), hi)
		p := w
		if i < len(prev) && prev[i] > 0 {
			p = prev[i]
		}
		out[i] = min(max(p+o.Alpha*(target-p), lo), hi)
	}
	return out
}
