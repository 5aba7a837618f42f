package docs_test

import (
	"regexp"
	"strings"
	"testing"
)

// figure is a number as the documents write one: digits with thousands
// commas, a decimal part, a range, and its unit if it has one.
var figure = regexp.MustCompile(`\d[\d,]*(?:\.\d+)?(?:-\d[\d,]*(?:\.\d+)?)?(?:\s?(?:%|ms|µs|s\b|MB|MiB|GB))?`)

// missingFigures returns the figures of text that do not appear in ref,
// both read with thousands commas dropped and spacing made single.
func missingFigures(text, ref string) []string {
	norm := func(s string) string {
		s = strings.ReplaceAll(s, ",", "")
		return strings.Join(strings.Fields(s), " ")
	}
	ref = norm(ref)
	var missing []string
	for _, f := range figure.FindAllString(text, -1) {
		if !strings.Contains(ref, norm(f)) {
			missing = append(missing, f)
		}
	}
	return missing
}

// TestREADMEFiguresAreBenchmarks: every figure of README.md's "Measured"
// list is one docs/benchmarks.md states, so that regenerating the benchmark
// page cannot leave the README quoting an older run.
func TestREADMEFiguresAreBenchmarks(t *testing.T) {
	checkMeasured(t, "README.md", read(t, "../README.md"))
	// And the check itself: a stale figure is caught, a reformatted one is not.
	if m := missingFigures("about 40,000 HTTP 302 redirects/s, 0.84 of a bare handler", "92393 req/s, 0.967"); len(m) != 3 || m[0] != "40,000" || m[1] != "302" || m[2] != "0.84" {
		t.Errorf("stale figures: got %q", m)
	}
	if m := missingFigures("92,393 req/s in 255.3 ms", "| 92393 | ApplyToSwap | 255.3  ms |"); len(m) != 0 {
		t.Errorf("the same figures, formatted otherwise: got %q", m)
	}
}

// checkMeasured fails unless every figure of doc's measured block
// (<!-- measured:begin --> ... <!-- measured:end -->) is one
// docs/benchmarks.md states.
func checkMeasured(t *testing.T, name, doc string) {
	t.Helper()
	measured := block(t, doc, "measured")
	if n := len(figure.FindAllString(measured, -1)); n < 20 {
		t.Fatalf("%s: the measured block holds %d figures; the pattern no longer reads them", name, n)
	}
	if m := missingFigures(measured, read(t, "benchmarks.md")); len(m) > 0 {
		t.Errorf("%s quotes figures docs/benchmarks.md does not state (update it from the benchmark page): %q", name, m)
	}
}

// block returns what doc holds between <!-- name:begin --> and
// <!-- name:end -->.
func block(t *testing.T, doc, name string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "<!-- "+name+":begin -->")
	b, _, ok2 := strings.Cut(rest, "<!-- "+name+":end -->")
	if !ok || !ok2 {
		t.Fatalf("no <!-- %s:begin --> ... <!-- %s:end --> block", name, name)
	}
	return b
}
