package overflow

import "sync/atomic"

// Counters count the new STB requests the routing engine sends to each node
// for each service, by snapshot index. The controller turns two readings
// into a rate; the hot path only adds.
type Counters struct {
	services, nodes int32
	cells           []cell // service-major: svc*nodes + node
}

// cell is one counter alone on its cache line: nodes of one region take
// requests at the same moment, and counters sharing a line would make the
// cores adding to them take turns on it (BenchmarkAddParallelSpread).
type cell struct {
	n atomic.Uint64
	_ [56]byte
}

// NewCounters returns zeroed counters for services × nodes (a snapshot's
// len(Services) and len(Nodes)); negative sizes count as 0.
func NewCounters(services, nodes int) *Counters {
	services, nodes = max(services, 0), max(nodes, 0)
	return &Counters{services: int32(services), nodes: int32(nodes), cells: make([]cell, services*nodes)}
}

// Add counts one request of service svc sent to node. It is safe on a nil
// *Counters (no overflow configured) and ignores indices out of range (an
// engine still answering from another snapshot than the counters'), so the
// hot path never checks or panics.
func (c *Counters) Add(svc, node int32) {
	if c == nil || uint32(svc) >= uint32(c.services) || uint32(node) >= uint32(c.nodes) {
		return
	}
	c.cells[int(svc)*int(c.nodes)+int(node)].n.Add(1)
}

// Load returns the requests counted for (svc, node) so far; 0 out of range
// or on a nil *Counters.
func (c *Counters) Load(svc, node int32) uint64 {
	if c == nil || uint32(svc) >= uint32(c.services) || uint32(node) >= uint32(c.nodes) {
		return 0
	}
	return c.cells[int(svc)*int(c.nodes)+int(node)].n.Load()
}

// Size returns the dimensions the counters were made for.
func (c *Counters) Size() (services, nodes int) {
	if c == nil {
		return 0, 0
	}
	return int(c.services), int(c.nodes)
}
