package outlier

import (
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

func TestConfigDefaults(t *testing.T) {
	d, err := New(Config{Enabled: true}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.Enabled = true
	if d.Config() != want {
		t.Errorf("config %+v, want %+v", d.Config(), want)
	}
	if DefaultConfig().Enabled {
		t.Error("enabled by default")
	}
	// A base above the default cap raises the cap rather than failing.
	if c := (Config{BaseEjection: 10 * time.Minute}).withDefaults(); c.MaxEjection != 10*time.Minute {
		t.Errorf("max_ejection %v with base_ejection 10m", c.MaxEjection)
	}
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte("enabled: true\nreask_window: 5s\nconsecutive_failures: 3\nfailure_rate: 0.25\nmin_requests: 50\ninterval: 30s\nbase_ejection: 1m\nmax_ejection: 10m\nmax_ejected_share: 0.2\nslots: 1024\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Enabled: true, ReaskWindow: 5 * time.Second, ConsecutiveFailures: 3, FailureRate: 0.25, MinRequests: 50,
		Interval: 30 * time.Second, BaseEjection: time.Minute, MaxEjection: 10 * time.Minute, MaxEjectedShare: 0.2, Slots: 1024}
	if c != want {
		t.Errorf("parsed %+v, want %+v", c, want)
	}
	if _, err := ParseConfig([]byte("enabled: true\nreask: 5s\n")); err == nil || !strings.Contains(err.Error(), "reask") {
		t.Errorf("unknown key: %v", err)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		cfg    Config
		fields []string // problems expected, by field
	}{
		{"zero is the defaults", Config{}, nil},
		{"all fields good", Config{Enabled: true, ReaskWindow: time.Second, ConsecutiveFailures: 32, FailureRate: 1, MinRequests: 1,
			Interval: time.Hour, BaseEjection: time.Second, MaxEjection: time.Second, MaxEjectedShare: 1, Slots: 1 << 8}, nil},
		{"negatives", Config{ReaskWindow: -1, ConsecutiveFailures: -1, FailureRate: -0.5, MinRequests: -1, Interval: -1,
			BaseEjection: -1, MaxEjectedShare: -1, Slots: -1},
			[]string{"reask_window", "consecutive_failures", "failure_rate", "min_requests", "interval", "base_ejection", "max_ejected_share", "slots"}},
		{"window too long for the slot clock", Config{ReaskWindow: time.Hour}, []string{"reask_window"}},
		{"window under the slot clock's resolution", Config{ReaskWindow: time.Millisecond}, []string{"reask_window"}},
		{"run longer than the failure ring", Config{ConsecutiveFailures: 33}, []string{"consecutive_failures"}},
		{"rate over one", Config{FailureRate: 1.5}, []string{"failure_rate"}},
		{"share over one", Config{MaxEjectedShare: 1.01}, []string{"max_ejected_share"}},
		{"cap under base", Config{BaseEjection: time.Minute, MaxEjection: 30 * time.Second}, []string{"max_ejection"}},
		{"slots not a power of two", Config{Slots: 1000}, []string{"slots"}},
		{"slots too many", Config{Slots: 1 << 27}, []string{"slots"}},
		{"interval too short", Config{Interval: time.Millisecond}, []string{"interval"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate("")
			if len(tc.fields) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			es, ok := yamlstrict.AsErrors(err)
			if !ok {
				t.Fatalf("error %v does not name fields", err)
			}
			var got []string
			for _, e := range es {
				got = append(got, e.Path)
			}
			if strings.Join(got, ",") != strings.Join(tc.fields, ",") {
				t.Errorf("problems at %v, want %v (%v)", got, tc.fields, err)
			}
		})
	}
}
