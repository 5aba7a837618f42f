package config

import (
	"time"

	"github.com/anysched/anysched/internal/topology"
	"github.com/anysched/anysched/internal/yamlstrict"
)

// Check configures a health checker (the healthcheck daemon, or one embedded
// in a regional scheduler).
type Check struct {
	Interval time.Duration `yaml:"interval"` // between probes of one server
	Timeout  time.Duration `yaml:"timeout"`  // of one probe
	Rise     int           `yaml:"rise"`     // consecutive successes to come up
	Fall     int           `yaml:"fall"`     // consecutive failures to go down
	// BandwidthThreshold: a server reporting more than this share of its
	// capacity gets no new STBs.
	BandwidthThreshold float64 `yaml:"bandwidth_threshold"`
}

// Health configures how a scheduler uses the checkers' verdicts.
type Health struct {
	Merge          string        `yaml:"merge"`           // optimistic | majority
	Grace          time.Duration `yaml:"grace"`           // keep a vanished checker's verdict this long
	PanicThreshold float64       `yaml:"panic_threshold"` // share of healthy servers below which a node ignores health
	// Embedded runs a checker inside a regional scheduler (small sites).
	Embedded bool  `yaml:"embedded"`
	Check    Check `yaml:"check"`
}

// DefaultCheck is the checker's defaults: a dead server is out within about
// 1.3 s (a failed probe, one fast re-probe, propagation).
func DefaultCheck() Check {
	return Check{Interval: time.Second, Timeout: 250 * time.Millisecond, Rise: 2, Fall: 2, BandwidthThreshold: 0.9}
}

// validate checks c; path is its key prefix ("" or "health.check."). A
// timeout above the interval is an error naming both keys: nothing lowers
// one to fit the other, so a shorter interval (file or --interval) needs a
// timeout that fits it (file or --timeout).
func (c Check) validate(errs *yamlstrict.Errors, path string) {
	if c.Interval < 50*time.Millisecond {
		errs.Add(path+"interval", "%s is below 50ms", c.Interval)
	}
	switch {
	case c.Timeout <= 0:
		errs.Add(path+"timeout", "must be > 0")
	case c.Timeout > c.Interval:
		errs.Add(path+"timeout", "%s must be at most %sinterval %s", c.Timeout, path, c.Interval)
	}
	if c.Rise < 1 || c.Rise > 100 {
		errs.Add(path+"rise", "%d is out of range [1, 100]", c.Rise)
	}
	if c.Fall < 1 || c.Fall > 100 {
		errs.Add(path+"fall", "%d is out of range [1, 100]", c.Fall)
	}
	if c.BandwidthThreshold <= 0 || c.BandwidthThreshold > 1 {
		errs.Add(path+"bandwidth_threshold", "%v is out of range (0, 1]", c.BandwidthThreshold)
	}
}

// Checker is the healthcheck daemon's configuration.
type Checker struct {
	Base `yaml:",inline"`
	// Region whose servers to probe; or Servers, an explicit list of names.
	Region  string   `yaml:"region"`
	Servers []string `yaml:"servers"`
	// CheckerID names this checker in its verdicts; default: hostname.
	CheckerID string `yaml:"checker_id"`
	Check     `yaml:",inline"`
}

// DefaultChecker returns the healthcheck daemon's defaults.
func DefaultChecker() Checker {
	return Checker{Base: defaultBase("/var/lib/anysched/healthcheck", "127.0.0.1:9102"), Check: DefaultCheck()}
}

// Validate checks the healthcheck daemon's configuration.
func (c *Checker) Validate() error {
	var errs yamlstrict.Errors
	if c.Region == "" && len(c.Servers) == 0 {
		errs.Add("region", "required (or servers: an explicit list)")
	} else if c.Region == topology.CenterName {
		errs.Add("region", "%q is reserved for the central scheduler, which has no servers", c.Region)
	}
	if len(c.Etcd.Endpoints) == 0 {
		errs.Add("etcd.endpoints", "required: the checker publishes its verdicts to the province's etcd")
	}
	c.Base.validate(&errs, false)
	c.Check.validate(&errs, "")
	return errs.Err()
}
