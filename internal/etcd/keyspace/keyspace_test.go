package keyspace_test

import (
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/etcd/keyspace"
)

// TestKeysDoNotOverlap: no key of the layout is a prefix of another's, so
// a watch on one never sees the other's writes.
func TestKeysDoNotOverlap(t *testing.T) {
	keys := keyspace.All()
	for i, a := range keys {
		for j, b := range keys {
			if i != j && strings.HasPrefix(b, a) {
				t.Errorf("key %q is a prefix of %q", a, b)
			}
		}
	}
}

// TestBuiltKeysStayInTheirConcept: every key built for a concept lies under
// that concept's prefix and no other's, so that a feed or a permission on
// one prefix covers exactly its concept.
func TestBuiltKeysStayInTheirConcept(t *testing.T) {
	for _, c := range []struct{ key, under string }{
		{keyspace.TopologyBlobs("d1"), keyspace.PrefixTopologyBlobs},
		{keyspace.TopologyHistory(7), keyspace.PrefixTopologyHistory},
		{keyspace.Instance("hefei", "hefei-1"), keyspace.PrefixInstances},
		{keyspace.Verdict("hefei", "chk-1", "s1"), keyspace.PrefixHealth},
		{keyspace.Checker("hefei", "chk-1"), keyspace.PrefixCheckers},
		{keyspace.Drain("server", "s1"), keyspace.PrefixDrain},
		{keyspace.Drill("hefei"), keyspace.PrefixDrill},
		{keyspace.AllocClaim("hefei", "hefei-1"), keyspace.PrefixAllocClaims},
		{keyspace.AllocStatePart("hefei", "hefei-1", 0), keyspace.PrefixAllocState},
		{keyspace.AllocStateHead("hefei", "hefei-1"), keyspace.PrefixAllocState},
		{keyspace.AllocStateBase("hefei", "hefei-1", 7, 0), keyspace.PrefixAllocState},
		{keyspace.AllocStateDelta("hefei", "hefei-1", 7, 1), keyspace.PrefixAllocState},
	} {
		for _, p := range keyspace.All() {
			if under := strings.HasPrefix(c.key, p); under != (p == c.under) {
				t.Errorf("%q under %q: %v", c.key, p, under)
			}
		}
	}
}

// TestBuiltKeys: the layout docs/design.md states, and the writers'
// prefixes that confine them.
func TestBuiltKeys(t *testing.T) {
	for got, want := range map[string]string{
		keyspace.TopologyBlobs("d1"):                           "topology/blobs/d1/",
		keyspace.TopologyHistory(7):                            "topology/history/000000000007",
		keyspace.Instance("hefei", "hefei-1"):                  "instances/hefei/hefei-1",
		keyspace.LegacyInstance("hefei-1"):                     "instances/hefei-1",
		keyspace.Verdicts("hefei", "chk-1"):                    "health/hefei/chk-1/",
		keyspace.Verdict("hefei", "chk-1", "s1"):               "health/hefei/chk-1/s1",
		keyspace.Checker("hefei", "chk-1"):                     "checkers/hefei/chk-1",
		keyspace.Drain("node", "hefei-1"):                      "drain/node/hefei-1",
		keyspace.Drill("center"):                               "drill/center",
		keyspace.AllocClaims("hefei"):                          "alloc/claims/hefei/",
		keyspace.AllocClaim("hefei", "hefei-1"):                "alloc/claims/hefei/hefei-1",
		keyspace.AllocStates("hefei"):                          "alloc/state/hefei/",
		keyspace.AllocState("hefei", "hefei-1"):                "alloc/state/hefei/hefei-1/",
		keyspace.AllocStatePart("hefei", "hefei-1", 12):        "alloc/state/hefei/hefei-1/0012",
		keyspace.AllocStateHead("hefei", "hefei-1"):            "alloc/state/hefei/hefei-1/h",
		keyspace.AllocStateBase("hefei", "hefei-1", 0xab, 3):   "alloc/state/hefei/hefei-1/b/00000000000000ab/0003",
		keyspace.AllocStateDelta("hefei", "hefei-1", 0xab, 12): "alloc/state/hefei/hefei-1/d/00000000000000ab/000012",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

// TestConcept: every key and prefix of the layout, and every key built
// under one, names its concept; ConceptNames lists each exactly once.
func TestConcept(t *testing.T) {
	for key, want := range map[string]string{
		keyspace.KeyTopologyCurrent:                    keyspace.ConceptTopology,
		keyspace.TopologyBlobs("d1") + "0001":          keyspace.ConceptTopology,
		keyspace.TopologyHistory(7):                    keyspace.ConceptTopology,
		keyspace.Instance("hefei", "hefei-1"):          keyspace.ConceptInstances,
		keyspace.Verdict("hefei", "chk-1", "s1"):       keyspace.ConceptHealth,
		keyspace.Checker("hefei", "chk-1"):             keyspace.ConceptCheckers,
		keyspace.Drain("server", "s1"):                 keyspace.ConceptDrain,
		keyspace.Drill("hefei"):                        keyspace.ConceptDrill,
		keyspace.KeyBalance:                            keyspace.ConceptBalance,
		keyspace.AllocClaim("hefei", "hefei-1"):        keyspace.ConceptAllocClaims,
		keyspace.AllocStatePart("hefei", "hefei-1", 3): keyspace.ConceptAllocState,
		keyspace.PrefixAudit + "0001-ab":               keyspace.ConceptAudit,
		"":                                             keyspace.ConceptOther,
		"topology/":                                    keyspace.ConceptOther,
		"elsewhere/x":                                  keyspace.ConceptOther,
	} {
		if got := keyspace.Concept(key); got != want {
			t.Errorf("Concept(%q) = %q, want %q", key, got, want)
		}
	}
	names := map[string]int{}
	for _, n := range keyspace.ConceptNames() {
		names[n]++
	}
	for _, k := range keyspace.All() {
		c := keyspace.Concept(k)
		if c == keyspace.ConceptOther || names[c] != 1 {
			t.Errorf("%q: concept %q, listed %d times in ConceptNames", k, c, names[c])
		}
	}
	if names[keyspace.ConceptOther] != 1 {
		t.Error("ConceptNames does not list ConceptOther")
	}
}

// TestParseCheckerKeys: the merger reads region, checker and server back
// from the keys, and refuses the layout before regions (whose region
// nobody vouched for) rather than misreading it.
func TestParseCheckerKeys(t *testing.T) {
	if r, c, s, ok := keyspace.ParseVerdict(keyspace.Verdict("hefei", "chk.1", "s1")); !ok || r != "hefei" || c != "chk.1" || s != "s1" {
		t.Errorf("ParseVerdict: %q %q %q %v", r, c, s, ok)
	}
	if r, c, ok := keyspace.ParseChecker(keyspace.Checker("hefei", "chk.1")); !ok || r != "hefei" || c != "chk.1" {
		t.Errorf("ParseChecker: %q %q %v", r, c, ok)
	}
	for _, k := range []string{"health/chk-1/s1", "health/hefei/chk-1/", "health//chk-1/s1", "health/hefei/chk-1/s1/x", "checkers/chk-1"} {
		if _, _, _, ok := keyspace.ParseVerdict(k); ok {
			t.Errorf("ParseVerdict(%q) ok", k)
		}
	}
	for _, k := range []string{"checkers/chk-1", "checkers/hefei/", "checkers//chk-1", "checkers/hefei/chk-1/x", "health/hefei/chk-1"} {
		if _, _, ok := keyspace.ParseChecker(k); ok {
			t.Errorf("ParseChecker(%q) ok", k)
		}
	}
}
