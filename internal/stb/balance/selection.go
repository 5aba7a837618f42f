package balance

import "github.com/anysched/anysched/internal/province/topology"

// Selection is a service's server-selection policy: topology.Selection,
// where the policies and their names are listed once. A Table builds and
// serves a policy for each selection but qoe, which it serves with nearest.
type Selection = topology.Selection

// The selections, as topology names them.
const (
	SelectNearest = topology.SelectNearest
	SelectSWRR    = topology.SelectSWRR
	SelectCHash   = topology.SelectCHash
	SelectP2C     = topology.SelectP2C
	SelectQoE     = topology.SelectQoE
)

// numSelections sizes the tables indexed by Selection.Index.
const numSelections = topology.NumSelections

// selections is topology.Selections(), in Index order, read once.
var selections = topology.Selections()
