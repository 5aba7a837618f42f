package balance

import (
	"sync"
	"sync/atomic"
)

// Live publishes a table the way a scheduler publishes its engine (which
// holds the table) through an atomic.Pointer: the tests use it to check
// that rebuilds inherit state and that readers may pick while a writer
// swaps.
// Readers call Load (one atomic load,
// no lock) and pick from the table they got; a writer builds a complete
// table and swaps it in. Rebuild serialises writers, so two concurrent
// rebuilds cannot both inherit from the same predecessor and lose one's
// state; readers never wait for it.
type Live struct {
	p  atomic.Pointer[Table]
	mu sync.Mutex // writers only
}

// Load returns the table in service (nil before the first Swap).
func (l *Live) Load() *Table { return l.p.Load() }

// Swap puts t in service and returns the table it replaced.
func (l *Live) Swap(t *Table) *Table { return l.p.Swap(t) }

// Rebuild builds a table from in, inheriting from the one in service, and
// swaps it in. On error the table in service stays.
func (l *Live) Rebuild(in TableInput) (*Table, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, err := BuildTable(in, l.p.Load())
	if err != nil {
		return nil, err
	}
	l.p.Store(t)
	return t, nil
}
