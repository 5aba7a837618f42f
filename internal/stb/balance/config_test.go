package balance

import (
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`
panic_threshold: 0.3
key: {by: path, query: [rendition]}
slow_start: {window: 90s, aggression: 2, min_share: 0.2}
adaptive: {enabled: true, rtt_ref: 50ms, alpha: 0.3, min: 0.2, max: 1.2}
swrr: {max_fails: 3}
chash: {virtual_nodes: 200, window: 10000}
p2c: {cpu_weight: 2, pick_mbps: 8}
rank: {by: rtt_loss, rtt_ref: 10ms, loss_weight: 20, panic_threshold: 0.5}
weights: {hefei-1-a: 50}
`))
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case c.Panic != 0.3, c.Key.By != KeyPath, c.Key.Query[0] != "rendition",
		c.SlowStart.Window != 90*time.Second, c.SlowStart.Aggression != 2,
		!c.Adaptive.Enabled, c.Adaptive.RTTRef != 50*time.Millisecond,
		c.SWRR.MaxFails != 3, c.CHash.VirtualNodes != 200,
		c.CHash.Epsilon != 0.25, // the default survives
		c.P2C.CPUWeight != 2, c.Rank.By != RankRTTLoss, c.Rank.RTTRef != 10*time.Millisecond,
		c.Rank.Panic != 0.5, c.Weights["hefei-1-a"] != 50:
		t.Errorf("decoded %+v", c)
	}
	// JSON is YAML too.
	if c, err := ParseConfig([]byte(`{"chash": {"epsilon": 0}}`)); err != nil || c.CHash.Epsilon != 0 {
		t.Errorf("json: %+v %v", c.CHash, err)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for doc, want := range map[string][]string{
		`chash: {epsiln: 0.2}`:                        {"chash.epsiln", "unknown field"},
		`key: {by: title}`:                            {"key.by", "unknown content key"},
		`rank: {by: ping}`:                            {"rank.by"},
		`swrr: {now: 2020-01-01}`:                     {"swrr.now", "unknown field"},
		`panic_threshold: 1.5`:                        {"panic_threshold", "fraction"},
		`{adaptive: {alpha: 2}, chash: {window: -1}}`: {"adaptive.alpha", "chash.window"},
		`weights: {a: -1, b: -2}`:                     {"weights.a", "weights.b"},
		`adaptive: {min: 1.5}`:                        {"adaptive", "must contain 1"},
		`slow_start: {window: soon}`:                  {"slow_start.window"},
	} {
		_, err := ParseConfig([]byte(doc))
		if err == nil {
			t.Errorf("%s: accepted", doc)
			continue
		}
		if _, ok := yamlstrict.AsErrors(err); !ok {
			t.Errorf("%s: %T is not field errors", doc, err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not mention %q", doc, err, w)
			}
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
}
