package lab

import (
	"strings"
	"testing"
	"time"
)

// TestAllocYAML: the planners' timings are the lab's short ones unless the
// options give others (bench/province runs the production defaults).
func TestAllocYAML(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{}, "  period: 2s\n  session_ttl: 4s\n"},
		{Options{AllocPeriod: 10 * time.Second, SessionTTL: 2 * time.Minute}, "  period: 10s\n  session_ttl: 2m0s\n"},
	} {
		got := (&Lab{o: c.o}).allocYAML("/k")
		if !strings.Contains(got, c.want) || !strings.Contains(got, "secret_file: /k") || !strings.HasPrefix(got, "alloc:\n") {
			t.Errorf("%+v:\n%s\nwant it to hold\n%s", c.o, got, c.want)
		}
	}
}
