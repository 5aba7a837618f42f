package announce

import (
	"errors"
	"fmt"
)

// Readiness is the rule a scheduler's route follows: announced only while
// the scheduler can really answer, with a snapshot (fresh, naming its
// region, for a city's scheduler), its front ends listening, and at least
// one available server anywhere to send STBs to. The center, the last
// resort of every city, does not withdraw for a stale snapshot: during a
// long etcd outage it keeps answering from what it has.
type Readiness struct {
	Center bool
	// Snapshot reports whether a topology snapshot is held (any age).
	Snapshot func() bool
	// Fresh is a city scheduler's own readiness: a fresh enough snapshot
	// that names its region.
	Fresh func() error
	// Routing reports whether a routing engine is built and has an
	// available server in some region.
	Routing   func() (built, available bool)
	FrontEnds []FrontEnd
}

// FrontEnd is one STB-facing listener the route waits for.
type FrontEnd struct {
	Name, Listen string
	// Listening asks the front end itself: dialing the listen address could
	// reach another scheduler while the service address is not local yet.
	Listening func() bool
}

// Check is the rule, a Controller's Ready: nil when the route may be
// announced, else why not.
func (r Readiness) Check() error {
	if r.Center {
		if !r.Snapshot() {
			return errors.New("no topology snapshot yet")
		}
	} else if err := r.Fresh(); err != nil {
		return err
	}
	built, available := r.Routing()
	if !built {
		return errors.New("no routing engine yet")
	}
	if !available {
		return errors.New("no available server in any region to send STBs to")
	}
	for _, f := range r.FrontEnds {
		if !f.Listening() {
			return fmt.Errorf("%s front end not listening on %s", f.Name, f.Listen)
		}
	}
	return nil
}
