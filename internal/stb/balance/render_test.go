package balance_test

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/balance"
)

// TestEffectiveRoundTrips: the effective policy, rendered, parses back to
// itself, fills the documented defaults, and keeps what the document set.
func TestEffectiveRoundTrips(t *testing.T) {
	c, err := balance.ParseConfig([]byte("slow_start: {window: 60s}\nrank: {by: rtt_loss}\nkey: {by: path, query: [rendition]}\nweights: {hefei-1-a: 50}\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := c.Effective()
	if e.CHash.VirtualNodes != 160 || e.Adaptive.Alpha != 0.2 || e.SlowStart.Window != time.Minute || e.Weights["hefei-1-a"] != 50 {
		t.Fatalf("effective = %+v", e)
	}
	doc, err := e.YAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := balance.ParseConfig(doc)
	if err != nil {
		t.Fatalf("the rendered policy does not parse: %v\n%s", err, doc)
	}
	if !reflect.DeepEqual(back, e) {
		t.Fatalf("round trip changed the policy:\n%+v\n%+v\n%s", back, e, doc)
	}
	if d := balance.Diff(e, back); d != nil {
		t.Fatalf("Diff of equal policies = %q", d)
	}
}

func TestDiffNamesEveryChangedField(t *testing.T) {
	a := balance.DefaultConfig().Effective()
	b := a
	b.CHash.Epsilon = 0.5
	b.Weights = map[string]float64{"hefei-1-a": 50}
	got := balance.Diff(a, b)
	want := []string{"chash.epsilon: 0.25 -> 0.5", "weights.hefei-1-a: - -> 50"}
	if !slices.Equal(got, want) {
		t.Fatalf("Diff = %q, want %q", got, want)
	}
}
