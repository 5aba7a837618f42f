package announce_test

import (
	"errors"
	"testing"

	"github.com/anysched/anysched/internal/routing/announce"
)

// TestReadinessRule: each condition of the route's readiness, in order,
// and the center that keeps its route with a stale snapshot.
func TestReadinessRule(t *testing.T) {
	stale := errors.New("snapshot is 2m old")
	ready := func() announce.Readiness {
		return announce.Readiness{
			Snapshot:  func() bool { return true },
			Fresh:     func() error { return nil },
			Routing:   func() (bool, bool) { return true, true },
			FrontEnds: []announce.FrontEnd{{Name: "http", Listen: ":80", Listening: func() bool { return true }}, {Name: "dns", Listen: ":53", Listening: func() bool { return true }}},
		}
	}
	for _, c := range []struct {
		name   string
		change func(*announce.Readiness)
		want   string
	}{
		{"ready", func(*announce.Readiness) {}, ""},
		{"stale snapshot", func(r *announce.Readiness) { r.Fresh = func() error { return stale } }, stale.Error()},
		{"center with a stale snapshot", func(r *announce.Readiness) { r.Center, r.Fresh = true, func() error { return stale } }, ""},
		{"center without a snapshot", func(r *announce.Readiness) { r.Center, r.Snapshot = true, func() bool { return false } }, "no topology snapshot yet"},
		{"no engine", func(r *announce.Readiness) { r.Routing = func() (bool, bool) { return false, false } }, "no routing engine yet"},
		{"nothing available", func(r *announce.Readiness) { r.Routing = func() (bool, bool) { return true, false } },
			"no available server in any region to send STBs to"},
		{"dns not listening", func(r *announce.Readiness) { r.FrontEnds[1].Listening = func() bool { return false } }, "dns front end not listening on :53"},
		{"no front end configured", func(r *announce.Readiness) { r.FrontEnds = nil }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := ready()
			c.change(&r)
			got := "" // ready
			if err := r.Check(); err != nil {
				got = err.Error()
			}
			if got != c.want {
				t.Errorf("Check: %q, want %q", got, c.want)
			}
		})
	}
}
