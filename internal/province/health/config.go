package health

import (
	"slices"
	"time"

	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// DefaultCheckerOptions is the defaults of the keys a configuration file
// sets: a dead server is out within about 1.3 s (a failed probe, one fast
// re-probe, propagation). The timeout is the interval's quarter, as
// NewChecker makes it when left zero.
func DefaultCheckerOptions() CheckerOptions {
	return CheckerOptions{Interval: time.Second, Timeout: 250 * time.Millisecond, Rise: 2, Fall: 2, BandwidthThreshold: 0.9}
}

// Validate checks the keys a configuration file sets, each problem named
// by its key under path ("" or "health.check."). A timeout above the
// interval is an error naming both keys: nothing lowers one to fit the
// other, so a shorter interval (file or --interval) needs a timeout that
// fits it (file or --timeout). The file cannot disable the bandwidth
// threshold, as a negative value does for a program.
func (o CheckerOptions) Validate(path string) error {
	var errs yamlstrict.Errors
	if o.Interval < 50*time.Millisecond {
		errs.Add(path+"interval", "%s is below 50ms", o.Interval)
	}
	switch {
	case o.Timeout <= 0:
		errs.Add(path+"timeout", "must be > 0")
	case o.Timeout > o.Interval:
		errs.Add(path+"timeout", "%s must be at most %sinterval %s", o.Timeout, path, o.Interval)
	}
	if o.Rise < 1 || o.Rise > 100 {
		errs.Add(path+"rise", "%d is out of range [1, 100]", o.Rise)
	}
	if o.Fall < 1 || o.Fall > 100 {
		errs.Add(path+"fall", "%d is out of range [1, 100]", o.Fall)
	}
	if o.BandwidthThreshold <= 0 || o.BandwidthThreshold > 1 {
		errs.Add(path+"bandwidth_threshold", "%v is out of range (0, 1]", o.BandwidthThreshold)
	}
	return errs.Err()
}

// DefaultMergerOptions is the defaults of a scheduler's health section: a
// server down only by every live checker, a vanished checker's verdict kept
// 10s, and a node with fewer than half its servers healthy ignoring health.
func DefaultMergerOptions() MergerOptions {
	return MergerOptions{Rule: MergeOptimistic, Grace: 10 * time.Second, PanicThreshold: 0.5}
}

// Validate checks the keys a configuration file sets, each problem named
// by its key under path ("health."). The file names its rule: an empty
// one, a program's default, is not accepted there.
func (o MergerOptions) Validate(path string) error {
	var errs yamlstrict.Errors
	if !slices.Contains([]string{MergeOptimistic, MergeMajority}, o.Rule) {
		errs.Add(path+"merge", "%q is not one of %s, %s", o.Rule, MergeOptimistic, MergeMajority)
	}
	if o.Grace < 0 {
		errs.Add(path+"grace", "must be >= 0")
	}
	if o.PanicThreshold < 0 || o.PanicThreshold > 1 {
		errs.Add(path+"panic_threshold", "%v is out of range [0, 1]", o.PanicThreshold)
	}
	return errs.Err()
}
