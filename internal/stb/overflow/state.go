package overflow

import "github.com/anysched/anysched/internal/province/topology"

// State is which nodes overflow, for one snapshot's indices. It is
// immutable: the controller publishes a new one on every change, and the
// routing engine reads whichever it loaded without locking.
type State struct {
	snap   *topology.Snapshot
	nodes  int32
	over   []bool   // service-major: svc*nodes + node
	reason []string // why each node is over; "" when it is not
}

// Snapshot returns the snapshot whose indices the state uses; the engine
// should only consult a state of the snapshot it answers from.
func (s *State) Snapshot() *topology.Snapshot {
	if s == nil {
		return nil
	}
	return s.snap
}

// Over reports whether node overflows for service svc: new STBs of the
// service go past it. False on a nil *State and for indices out of range.
func (s *State) Over(svc, node int32) bool {
	i := s.index(svc, node)
	return i >= 0 && s.over[i]
}

// Reason says why node overflows for svc, as when it went over (for
// example "bandwidth 93% >= 90%"); "" when it does not.
func (s *State) Reason(svc, node int32) string {
	if i := s.index(svc, node); i >= 0 {
		return s.reason[i]
	}
	return ""
}

// Count returns how many nodes overflow for service svc.
func (s *State) Count(svc int32) int {
	if s == nil || svc < 0 || s.nodes == 0 || int(svc) >= len(s.over)/int(s.nodes) {
		return 0
	}
	n := 0
	for _, o := range s.over[int(svc)*int(s.nodes) : int(svc+1)*int(s.nodes)] {
		if o {
			n++
		}
	}
	return n
}

func (s *State) index(svc, node int32) int {
	if s == nil || uint32(node) >= uint32(s.nodes) || svc < 0 {
		return -1
	}
	i := int(svc)*int(s.nodes) + int(node)
	if i >= len(s.over) {
		return -1
	}
	return i
}
