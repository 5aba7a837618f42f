package accesslog

import (
	"strings"
	"testing"
)

// The section's defaults are valid, and each problem is named under the
// section's path.
func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate("access_log."); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
	c := Config{File: "access.log", Options: Options{Queue: -1}}
	err := c.Validate("access_log.")
	for _, want := range []string{
		"access_log.sample_every: must be >= 1",
		"access_log.queue: -1 is out of range [0, 4194304] (0: 8192)",
		`access_log.file: "access.log" is not an absolute path`,
		"access_log.max_errors_per_second: 0 is out of range [1, 1000000]",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}
