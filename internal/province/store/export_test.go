package store

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"hash/maphash"
)

// EncodeLegacyPart writes part i of n of st in the gzipped JSON layout the
// binary one replaced, as generation gen, for the tests of reading it.
func EncodeLegacyPart(gen int64, i, n int, st *AllocState) (string, error) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if err := json.NewEncoder(zw).Encode(statePart{Gen: gen, Part: i, Parts: n, State: st}); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return b.String(), nil
}

// MemState is the plan state's format without etcd: a writer and what it
// stored, as the keys under an instance's prefix would hold it.
type MemState struct {
	w      stateWriter
	head   []byte
	base   [][]byte
	deltas [][]byte
}

// NewMemState is an empty one.
func NewMemState() *MemState { return &MemState{w: stateWriter{seed: maphash.MakeSeed()}} }

// Publish writes st as PutAllocState would: it reports whether it started
// a generation and the bytes it wrote.
func (m *MemState) Publish(region string, st *AllocState) (generation bool, written int, err error) {
	if err := checkState(region, st); err != nil {
		return false, 0, err
	}
	p, err := m.w.next(st)
	if err != nil {
		m.w.forget()
		return false, 0, err
	}
	m.head = p.value
	written = len(p.value)
	if p.delta != nil {
		m.deltas = append(m.deltas, p.delta)
		return false, written + len(p.delta), nil
	}
	m.base, m.deltas = p.base, nil
	for _, b := range p.base {
		written += len(b)
	}
	return true, written, nil
}

// Forget drops what the writer remembers, as a failed write does.
func (m *MemState) Forget() { m.w.forget() }

// Values are the stored values: the head, the base parts, the deltas.
func (m *MemState) Values() (head []byte, base, deltas [][]byte) { return m.head, m.base, m.deltas }

// DecodeState reads a stored state from its values, as AllocState does.
func DecodeState(head []byte, base, deltas [][]byte) (*AllocState, error) {
	h, err := decodeHead(head)
	if err != nil {
		return nil, err
	}
	return reconstruct(h, base, deltas)
}

// SeenGrid is the step Seen is kept in, in milliseconds.
const SeenGrid = stateSeenGrid

// DecodeRawState reads a stored state from its values' payloads (without
// the frame and the compression), for the fuzz target to reach the
// payload decoder cheaply.
func DecodeRawState(head []byte, base, deltas [][]byte) (*AllocState, error) {
	h, err := (&decoder{b: head}).head()
	if err != nil {
		return nil, err
	}
	if len(base) != h.baseParts || len(deltas) != h.seq {
		return nil, fmt.Errorf("%d base parts and %d deltas, the head says %d and %d", len(base), len(deltas), h.baseParts, h.seq)
	}
	r := &stateTable{gen: h.gen}
	for k, v := range base {
		if err := r.baseFrom(&decoder{b: v}, k); err != nil {
			return nil, err
		}
	}
	for i, v := range deltas {
		if err := r.deltaFrom(&decoder{b: v}, i+1); err != nil {
			return nil, err
		}
	}
	return r.state(h)
}

// SealState frames a raw payload as a stored value of kind ('h', 'b', 'd').
func SealState(kind byte, payload []byte) []byte { return seal(kind, payload) }

// UnsealState is a stored value's raw payload (nil if it is none).
func UnsealState(val []byte) []byte {
	if len(val) <= len(stateMagic) {
		return nil
	}
	d, err := open(val, val[len(stateMagic)])
	if err != nil {
		return nil
	}
	return d.b
}
