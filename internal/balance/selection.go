package balance

import "fmt"

// Selection is a service's server-selection policy (topology
// services[].selection).
type Selection uint8

// Selections. The zero value is nearest, the topology's default.
const (
	SelectNearest Selection = iota // nearest node; rendezvous hash of the client inside it
	SelectSWRR                     // smooth weighted round robin, adaptive weights, slow start
	SelectCHash                    // consistent hash of the content key, bounded loads
	SelectP2C                      // power of two choices on a load score
	// SelectQoE is decided by the QoE allocation (internal/alloc), not here;
	// for STBs its plan does not cover a Table serves the nearest policy.
	SelectQoE
	numSelections
)

var selectionNames = [...]string{"nearest", "swrr", "chash", "p2c", "qoe"}

func (s Selection) String() string {
	if int(s) < len(selectionNames) {
		return selectionNames[s]
	}
	return fmt.Sprintf("Selection(%d)", s)
}

// ParseSelection parses a topology selection name.
func ParseSelection(name string) (Selection, error) {
	for i, n := range selectionNames {
		if n == name {
			return Selection(i), nil
		}
	}
	return 0, fmt.Errorf("unknown selection %q (want nearest, swrr, chash, p2c or qoe)", name)
}

// Selections lists every selection, in the order of their values.
func Selections() []Selection {
	out := make([]Selection, numSelections)
	for i := range out {
		out[i] = Selection(i)
	}
	return out
}

// MarshalText implements encoding.TextMarshaler.
func (s Selection) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Selection) UnmarshalText(b []byte) error {
	v, err := ParseSelection(string(b))
	if err == nil {
		*s = v
	}
	return err
}
