package outlier

import (
	"time"

	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// Config is the outlier detection configuration. Zero fields take the
// documented defaults (DefaultConfig), so a document sets only what it changes:
//
//	enabled: true
//	reask_window: 10s
//	consecutive_failures: 5
//	failure_rate: 0.5
//	min_requests: 20
//	interval: 10s
//	base_ejection: 30s
//	max_ejection: 5m
//	max_ejected_share: 0.5
//	slots: 65536
type Config struct {
	// Enabled turns detection on; a disabled Detector observes nothing and
	// never ejects.
	Enabled bool `yaml:"enabled" json:"enabled"`
	// ReaskWindow: a request for the same (client, content) within it after
	// an answer is a failure of the server of that answer.
	ReaskWindow time.Duration `yaml:"reask_window" json:"reask_window"`
	// ConsecutiveFailures ejects a server whose this many consecutive
	// requests (in the order they were sent to it) were re-asked.
	ConsecutiveFailures int `yaml:"consecutive_failures" json:"consecutive_failures"`
	// FailureRate ejects a server whose re-asks (or edge-reported errors) per
	// request over the last Interval reach it, once MinRequests were seen.
	FailureRate float64 `yaml:"failure_rate" json:"failure_rate"`
	MinRequests int64   `yaml:"min_requests" json:"min_requests"`
	// Interval is the span the rate rule looks back over.
	Interval time.Duration `yaml:"interval" json:"interval"`
	// BaseEjection: the n-th ejection in a row lasts n x BaseEjection, at
	// most MaxEjection; a server back for MaxEjection without an ejection
	// starts again from one.
	BaseEjection time.Duration `yaml:"base_ejection" json:"base_ejection"`
	MaxEjection  time.Duration `yaml:"max_ejection" json:"max_ejection"`
	// MaxEjectedShare bounds the share of a node's servers ejected at once
	// (rounded down, and always leaving one server in).
	MaxEjectedShare float64 `yaml:"max_ejected_share" json:"max_ejected_share"`
	// Slots sizes the re-ask table (a power of two). Each slot remembers one
	// recent (client, content) answer; size it at several times the peak
	// requests per second x reask_window, or re-asks are lost to
	// overwriting (the rules then see fewer failures than there were).
	Slots int `yaml:"slots" json:"slots"`
}

// DefaultConfig is the configuration every zero field falls back to.
func DefaultConfig() Config {
	return Config{
		ReaskWindow:         10 * time.Second,
		ConsecutiveFailures: 5,
		FailureRate:         0.5,
		MinRequests:         20,
		Interval:            10 * time.Second,
		BaseEjection:        30 * time.Second,
		MaxEjection:         5 * time.Minute,
		MaxEjectedShare:     0.5,
		Slots:               1 << 16,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.ReaskWindow == 0 {
		c.ReaskWindow = d.ReaskWindow
	}
	if c.ConsecutiveFailures == 0 {
		c.ConsecutiveFailures = d.ConsecutiveFailures
	}
	if c.FailureRate == 0 {
		c.FailureRate = d.FailureRate
	}
	if c.MinRequests == 0 {
		c.MinRequests = d.MinRequests
	}
	if c.Interval == 0 {
		c.Interval = d.Interval
	}
	if c.BaseEjection == 0 {
		c.BaseEjection = d.BaseEjection
	}
	if c.MaxEjection == 0 {
		// A base above the default cap would otherwise be an error nobody
		// asked for.
		c.MaxEjection = max(d.MaxEjection, c.BaseEjection)
	}
	if c.MaxEjectedShare == 0 {
		c.MaxEjectedShare = d.MaxEjectedShare
	}
	if c.Slots == 0 {
		c.Slots = d.Slots
	}
	return c
}

// Limits of the slot encoding (see slot.go): the window must stay far
// below the 36-minute wrap of a slot's clock, and the run detector keeps
// the last ringSize failures of a server.
const (
	minReaskWindow = 10 * time.Millisecond
	maxReaskWindow = 5 * time.Minute
	minSlots       = 1 << 8
	maxSlots       = 1 << 26
)

// ParseConfig decodes a YAML (or JSON) document strictly and validates it.
// Omitted fields stay zero; New applies the defaults.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	if err := yamlstrict.Decode(data, &c); err != nil {
		return Config{}, err
	}
	return c, c.Validate("")
}

// Validate checks every field (zero ones with their defaults) and reports
// all problems at once, each named by its key under path (the section's
// place in the file, "outlier."; "" for a document of its own).
func (c Config) Validate(path string) error {
	var errs yamlstrict.Errors
	c = c.withDefaults()
	if c.ReaskWindow < minReaskWindow || c.ReaskWindow > maxReaskWindow {
		errs.Add(path+"reask_window", "%v is not in [%v, %v]", c.ReaskWindow, minReaskWindow, maxReaskWindow)
	}
	if c.ConsecutiveFailures < 1 || c.ConsecutiveFailures > ringSize/2 {
		errs.Add(path+"consecutive_failures", "%d is not in [1, %d]", c.ConsecutiveFailures, ringSize/2)
	}
	if !(c.FailureRate > 0 && c.FailureRate <= 1) {
		errs.Add(path+"failure_rate", "%v is not a fraction in (0, 1]", c.FailureRate)
	}
	if c.MinRequests < 1 {
		errs.Add(path+"min_requests", "%d is not positive", c.MinRequests)
	}
	if c.Interval < time.Second || c.Interval > time.Hour {
		errs.Add(path+"interval", "%v is not in [1s, 1h]", c.Interval)
	}
	if c.BaseEjection < time.Second {
		errs.Add(path+"base_ejection", "%v is shorter than 1s", c.BaseEjection)
	}
	if c.MaxEjection < c.BaseEjection {
		errs.Add(path+"max_ejection", "%v is shorter than %sbase_ejection %v", c.MaxEjection, path, c.BaseEjection)
	}
	if !(c.MaxEjectedShare > 0 && c.MaxEjectedShare <= 1) {
		errs.Add(path+"max_ejected_share", "%v is not a fraction in (0, 1]", c.MaxEjectedShare)
	}
	if c.Slots < minSlots || c.Slots > maxSlots || c.Slots&(c.Slots-1) != 0 {
		errs.Add(path+"slots", "%d is not a power of two in [%d, %d]", c.Slots, minSlots, maxSlots)
	}
	return errs.Err()
}
