package store

import "fmt"

// Format versions of the documents this package writes into etcd and
// reads back (docs/design.md, "Compatibility across releases"). A reader
// refuses, whole, a document in a format newer than the one it knows: a
// later release may change what a field means, and a document read in
// part is worse than none. A release that introduces a format still
// reads the one before and writes it until the release after, so that
// the release before, to which the province may be rolled back, reads
// everything.
const (
	// ClaimsFormat is the capacity claims' format (Claims.Format; absent
	// is 1).
	ClaimsFormat = 1
	// StateFormat is the plan state's binary format: the digit of its
	// magic, "AS2" (statecodec.go); the gzipped JSON parts before it
	// were 1.
	StateFormat = 2
)

// NewerFormatError is a document refused because a newer release wrote
// it in a format this build does not read.
type NewerFormatError struct {
	Document string // what was refused: "capacity claims", "plan state"
	Format   int    // its format
	Reads    int    // the newest this build reads
}

func (e *NewerFormatError) Error() string {
	return fmt.Sprintf("%s in format %d, newer than the %d this build reads: written by a newer release; refused whole (upgrade this scheduler, or roll the writer back)", e.Document, e.Format, e.Reads)
}
