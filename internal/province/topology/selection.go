package topology

import (
	"fmt"
	"strings"
)

// Selection is a service's server-selection policy (services[].selection),
// by its name in the document. It is the one list of policies: Compile
// checks a document's against it, the snapshot carries it typed (defaulted,
// valid), and balance and steer switch on its constants.
//
// It stays a name rather than a number so that a document of a newer
// version, naming a policy this one does not know, still decodes (from YAML
// or the stored JSON) and is refused by Compile with every other problem of
// the document, field path included.
type Selection string

// The selections this version implements.
const (
	SelectNearest Selection = "nearest" // nearest node; rendezvous hash of the client inside it
	SelectSWRR    Selection = "swrr"    // smooth weighted round robin, adaptive weights, slow start
	SelectCHash   Selection = "chash"   // consistent hash of the content key, bounded loads
	SelectP2C     Selection = "p2c"     // power of two choices on a load score
	// SelectQoE is decided by the live QoE allocation (internal/allocation/allocator);
	// for STBs its plan does not cover, the nearest policy answers.
	SelectQoE Selection = "qoe"
)

// DefaultSelection is the policy of a service that names none.
const DefaultSelection = SelectNearest

// selections is every policy, in Index order.
var selections = [...]Selection{SelectNearest, SelectSWRR, SelectCHash, SelectP2C, SelectQoE}

// NumSelections is how many policies there are: Index is below it.
const NumSelections = len(selections)

// Selections lists every policy, in Index order.
func Selections() []Selection { return append([]Selection(nil), selections[:]...) }

// Index is s's position in Selections(), for tables indexed by policy; -1
// when this version does not implement s. The empty selection (a document
// that names none) is DefaultSelection.
func (s Selection) Index() int {
	if s == "" {
		s = DefaultSelection
	}
	for i, v := range selections {
		if v == s {
			return i
		}
	}
	return -1
}

// Valid reports whether this version implements s ("" is the default).
func (s Selection) Valid() bool { return s.Index() >= 0 }

// OrDefault is s, or DefaultSelection when s is empty.
func (s Selection) OrDefault() Selection {
	if s == "" {
		return DefaultSelection
	}
	return s
}

// ParseSelection reads a policy name; "" is DefaultSelection. The error
// lists the supported names.
func ParseSelection(name string) (Selection, error) {
	s := Selection(name)
	if !s.Valid() {
		return "", fmt.Errorf("%q is not supported (supported: %s)", name, selectionNames())
	}
	return s.OrDefault(), nil
}

func selectionNames() string {
	names := make([]string, len(selections))
	for i, s := range selections {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}
