package accesslog

import (
	"path/filepath"

	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// Config is the access_log section of a scheduler's configuration: where
// the lines go, and the recorder's Options.
type Config struct {
	Enabled bool `yaml:"enabled"`
	// File receives the lines (appended, created 0640, reopened on SIGHUP
	// after logrotate has moved it); empty: standard output.
	File    string `yaml:"file"`
	Options `yaml:",inline"`
}

// DefaultConfig is the section's defaults: every decision logged, to
// standard output, with the recorder's default limits.
func DefaultConfig() Config {
	return Config{Enabled: true, Options: Options{SampleEvery: 1, MaxErrorsPerSecond: DefaultMaxErrorsPerSecond}}
}

// Validate checks the section, each problem named by its key under path
// ("access_log."). The file names a sampling rate and an error limit: the
// zero values a program may leave to the defaults are errors there.
func (c Config) Validate(path string) error {
	var errs yamlstrict.Errors
	if c.SampleEvery == 0 {
		errs.Add(path+"sample_every", "must be >= 1")
	}
	if c.Queue < 0 || c.Queue > 1<<22 {
		errs.Add(path+"queue", "%d is out of range [0, 4194304] (0: %d)", c.Queue, DefaultQueue)
	}
	if c.File != "" && !filepath.IsAbs(c.File) {
		errs.Add(path+"file", "%q is not an absolute path", c.File)
	}
	if c.MaxErrorsPerSecond < 1 || c.MaxErrorsPerSecond > 1e6 {
		errs.Add(path+"max_errors_per_second", "%d is out of range [1, 1000000]", c.MaxErrorsPerSecond)
	}
	return errs.Err()
}
