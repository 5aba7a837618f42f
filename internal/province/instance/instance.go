// Package instance names what a scheduler instance is (its role) and where
// it stands (its state), once, as its registration record, the admin API
// and the logs spell them: the schedulers write them, and the admin API,
// schedctl, the console and the router configurations read them.
package instance

// Role is what a scheduler instance is.
type Role string

// The roles.
const (
	Central  Role = "central"
	Regional Role = "regional"
)

// String is the role as its record and the admin API spell it.
func (r Role) String() string { return string(r) }

// State is where a scheduler instance stands, as its record says.
type State string

// The states.
const (
	// Starting: it has no snapshot yet.
	Starting State = "starting"
	// Ready: it can answer from its snapshot.
	Ready State = "ready"
	// Stale: it has a snapshot but is not ready (the snapshot is stale, or
	// cannot answer its region).
	Stale State = "stale"
)

// String is the state as its record and the admin API spell it.
func (s State) String() string { return string(s) }
