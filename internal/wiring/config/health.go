package config

import (
	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// Health configures how a scheduler uses the checkers' verdicts: the
// merger's keys (merge, grace, panic_threshold; the health package owns
// them), and an embedded checker.
type Health struct {
	health.MergerOptions `yaml:",inline"`
	// Embedded runs a checker inside a regional scheduler (small sites).
	Embedded bool `yaml:"embedded"`
	// Check is the embedded checker's settings; the health package owns
	// them (keys, defaults, Validate).
	Check health.CheckerOptions `yaml:"check"`
}

// Checker is the healthcheck daemon's configuration.
type Checker struct {
	Base `yaml:",inline"`
	// Region whose servers to probe; or Servers, an explicit list of names.
	Region  string   `yaml:"region"`
	Servers []string `yaml:"servers"`
	// CheckerID names this checker in its verdicts; default: hostname.
	CheckerID             string `yaml:"checker_id"`
	health.CheckerOptions `yaml:",inline"`
}

// DefaultChecker returns the healthcheck daemon's defaults.
func DefaultChecker() Checker {
	return Checker{Base: defaultBase("/var/lib/anysched/healthcheck", "127.0.0.1:9102"), CheckerOptions: health.DefaultCheckerOptions()}
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
	if es, ok := yamlstrict.AsErrors(c.CheckerOptions.Validate("")); ok {
		errs = append(errs, es...)
	}
	return errs.Err()
}
