package outlier

import "testing"

// TestEdgeTotalsSince: an edge's running totals become the counts since
// its last report; first totals, no new request and a restart (a total
// going down) report nothing.
func TestEdgeTotalsSince(t *testing.T) {
	var e EdgeTotals
	for _, c := range []struct {
		name           string
		requests, errs int64
		dr, de         int64
		ok             bool
	}{
		{"a", 0, 0, 0, 0, false},   // no requests yet
		{"a", 100, 2, 0, 0, false}, // first totals
		{"a", 150, 5, 50, 3, true}, // since the last
		{"b", 10, 0, 0, 0, false},  // another server's first
		{"a", 150, 6, 0, 0, false}, // no new request
		{"a", 20, 1, 0, 0, false},  // restarted
		{"a", 30, 1, 10, 0, true},  // counting from the restart
		{"a", 40, 0, 0, 0, false},  // errors went down: a restart too
		{"b", 15, 1, 5, 1, true},   // b still follows its own totals
	} {
		dr, de, ok := e.Since(c.name, c.requests, c.errs)
		if dr != c.dr || de != c.de || ok != c.ok {
			t.Errorf("Since(%s, %d, %d) = %d, %d, %t; want %d, %d, %t", c.name, c.requests, c.errs, dr, de, ok, c.dr, c.de, c.ok)
		}
	}
}
