package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"strconv"
	"strings"
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

// MemState is the plan state's format without etcd: a writer and a store
// in memory with etcd's semantics for what the writer does (revisions,
// guarded transactions), which can fail an operation, before or after
// storing what it was given.
type MemState struct {
	w    stateWriter
	sink memSink
}

// NewMemState is an empty one.
func NewMemState() *MemState {
	return &MemState{w: stateWriter{seed: maphash.MakeSeed()}, sink: memSink{failAt: -1}}
}

// Publish writes st as PutAllocState would: it reports whether it started
// a generation and the bytes it wrote (values; every attempt counted).
func (m *MemState) Publish(region string, st *AllocState) (generation bool, written int, err error) {
	if err := checkState(region, st); err != nil {
		return false, 0, err
	}
	m.sink.written, m.sink.ops, m.sink.attempted = 0, 0, nil
	generation, err = putState(context.Background(), &m.sink, st, &m.w)
	return generation, m.sink.written, err
}

// SmallParts bounds the base parts at n bytes: a generation of a few
// thousand sessions in several parts.
func (m *MemState) SmallParts(n int) { m.w.partBytes = n }

// FailAt makes operation op (from 0) of each later publication fail,
// after storing what it was given if landed; -1: none.
func (m *MemState) FailAt(op int, landed bool) { m.sink.failAt, m.sink.landed = op, landed }

// Forget drops what the writer remembers, as a restart does.
func (m *MemState) Forget() { m.w.forget() }

// Values are the stored values a reader takes: the head, the base parts
// and the deltas it names (those present, in order).
func (m *MemState) Values() (head []byte, base, deltas [][]byte) {
	head = m.sink.kv["h"].v
	h, err := decodeHead(head)
	if err != nil {
		return head, nil, nil
	}
	for k := range h.baseParts {
		if v, ok := m.sink.kv[fmt.Sprintf("b/%016x/%04d", h.gen, k)]; ok {
			base = append(base, v.v)
		}
	}
	for q := 1; q <= h.seq; q++ {
		if v, ok := m.sink.kv[fmt.Sprintf("d/%016x/%06d", h.gen, q)]; ok {
			deltas = append(deltas, v.v)
		}
	}
	return head, base, deltas
}

// Keys are the keys stored, sorted; Attempted the base parts the last
// publication tried to write, in order.
func (m *MemState) Keys() []string { return slices.Sorted(maps.Keys(m.sink.kv)) }

func (m *MemState) Attempted() []string { return m.sink.attempted }

// memSink is etcd's keys of one instance's state, in memory.
type memSink struct {
	rev     int64
	kv      map[string]memValue
	ops     int // of this publication
	failAt  int // the operation that fails (-1: none)
	landed  bool
	written int // bytes sent, stored or not
	// attempted are the base parts written, stored or not
	attempted []string
}

type memValue struct {
	v   []byte
	rev int64
}

var errMemFail = errors.New("an injected failure")

// op starts an operation sending bytes: whether it fails, and whether
// it stores what it was given.
func (s *memSink) op(bytes int) (fail, store bool) {
	n := s.ops
	s.ops++
	s.written += bytes
	if n == s.failAt {
		return true, s.landed
	}
	return false, true
}

func (s *memSink) put(k string, v []byte) {
	if s.kv == nil {
		s.kv = map[string]memValue{}
	}
	s.kv[k] = memValue{v: v, rev: s.rev}
}

func (s *memSink) putPart(_ context.Context, gen uint64, k int, v []byte) (int64, error) {
	fail, store := s.op(len(v))
	key := fmt.Sprintf("b/%016x/%04d", gen, k)
	s.attempted = append(s.attempted, key)
	if store {
		s.rev++
		s.put(key, v)
	}
	if fail {
		return 0, errMemFail
	}
	return s.rev, nil
}

func (s *memSink) storedParts(_ context.Context, gen uint64) (map[int]int64, error) {
	if fail, _ := s.op(0); fail {
		return nil, errMemFail
	}
	out := map[int]int64{}
	p := fmt.Sprintf("b/%016x/", gen)
	for k, v := range s.kv {
		if n, ok := strings.CutPrefix(k, p); ok {
			if i, err := strconv.Atoi(n); err == nil {
				out[i] = v.rev
			}
		}
	}
	return out, nil
}

func (s *memSink) deltas(gen uint64, deltas []queued, head []byte) {
	for _, q := range deltas {
		s.put(fmt.Sprintf("d/%016x/%06d", gen, q.seq), q.delta)
	}
	s.put("h", head)
}

func size(deltas []queued, head []byte) int {
	n := len(head)
	for _, q := range deltas {
		n += len(q.delta)
	}
	return n
}

func (s *memSink) commit(_ context.Context, gen uint64, partRev []int64, deltas []queued, head []byte) (bool, int64, error) {
	fail, store := s.op(size(deltas, head))
	ok := true
	for k, rev := range partRev {
		if v, there := s.kv[fmt.Sprintf("b/%016x/%04d", gen, k)]; !there || v.rev != rev {
			ok = false
		}
	}
	if store && ok {
		s.rev++
		keep := fmt.Sprintf("/%016x/", gen)
		for k := range s.kv {
			if k != "h" && !strings.Contains(k, keep) {
				delete(s.kv, k)
			}
		}
		s.deltas(gen, deltas, head)
	}
	if fail {
		return false, 0, errMemFail
	}
	return ok, s.rev, nil
}

func (s *memSink) extend(_ context.Context, gen uint64, rev int64, deltas []queued, head []byte) (bool, int64, []byte, int64, error) {
	fail, store := s.op(size(deltas, head))
	cur, there := s.kv["h"]
	ok := there && cur.rev == rev
	if store && ok {
		s.rev++
		s.deltas(gen, deltas, head)
	}
	switch {
	case fail:
		return false, 0, nil, 0, errMemFail
	case ok:
		return true, s.rev, nil, 0, nil
	case there:
		return false, 0, cur.v, cur.rev, nil
	}
	return false, 0, nil, 0, nil
}

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

// StateMaxKeys is how many keys of a region's plan states AllocState lists.
const StateMaxKeys = stateMaxKeys

// GunzipSized decompresses a topology's parts no further than size.
var GunzipSized = gunzipSized

// StateMagic is the plan state values' magic, its last byte the format.
const StateMagic = stateMagic
