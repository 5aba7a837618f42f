package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// AllocState is one QoE planner's plan of a region as it published it:
// the sessions with where they were sent, and the plan's prices. Whoever
// plans the region next starts from the freshest one, so viewers keep
// their server and bitrate across a failover and back.
type AllocState struct {
	Instance string    `json:"instance"`
	Made     time.Time `json:"made"`
	Revision int64     `json:"revision"` // of the topology the plan was made on
	// Servers and Services name what the sessions refer to by index.
	Servers  []string       `json:"servers"`
	Services []ServiceState `json:"services"`
	Sessions []SessionState `json:"sessions"`
}

// ServiceState is a service's part of the plan: the prices of its
// servers' capacities (by Servers index; zero when absent).
type ServiceState struct {
	Name   string       `json:"name"`
	Prices [][2]float64 `json:"prices,omitempty"` // bandwidth per kbps, compute per unit
}

// SessionState is one session (a viewer on one STB watching a channel).
// Short field names: a city's state holds up to a million of them.
type SessionState struct {
	Service int32      `json:"v"`           // Services index
	User    string     `json:"u,omitempty"` // the token's subject
	Addr    netip.Addr `json:"a"`
	Channel string     `json:"c"`
	Desired float64    `json:"d,omitempty"` // kbps
	Danmaku float64    `json:"f,omitempty"`
	Gift    float64    `json:"g,omitempty"`
	Lat     float64    `json:"la"`
	Lon     float64    `json:"lo"`
	Server  int32      `json:"s"` // Servers index; -1 for the fallback
	Kbps    float64    `json:"k"`
	Seen    int64      `json:"t"` // unix milliseconds of its last request
}

// stateWriterIdle: what a store remembers of a state it has not published
// for this long is dropped (a center that planned a fallen city and
// stopped); the next publication starts a generation.
const stateWriterIdle = time.Hour

func (s *Store) statePrefix(region string) string {
	return s.prefix + keyspace.AllocStates(region)
}

// writerFor returns what the store remembers of instance's state of
// region, locked; stale ones of others are dropped.
func (s *Store) writerFor(region, instance string, now time.Time) *lockedWriter {
	s.statesMu.Lock()
	defer s.statesMu.Unlock()
	if s.states == nil {
		s.states = map[string]*lockedWriter{}
	}
	for k, w := range s.states {
		if w.TryLock() {
			if now.Sub(w.w.used) > stateWriterIdle {
				delete(s.states, k)
			}
			w.Unlock()
		}
	}
	k := region + "/" + instance
	w := s.states[k]
	if w == nil {
		w = &lockedWriter{w: stateWriter{seed: maphash.MakeSeed(), partBytes: s.StatePartBytes}}
		s.states[k] = w
	}
	w.Lock()
	w.w.used = now
	return w
}

// lockedWriter is a stateWriter with its lock: one publication of a
// state at a time.
type lockedWriter struct {
	sync.Mutex
	w stateWriter
}

// PutAllocState publishes st as instance's state of region: the changes
// since the previous publication as a delta, in one transaction with the
// head, or a new generation (docs/design.md, "Plan state in etcd"): its
// base parts first, then, in one transaction, the head and the deletion
// of everything else of the instance's (the previous generation, the
// gzipped JSON parts of an older build). So a reader sees either
// publication whole. A publication that fails is not made again: the
// next one writes what this one did not (the rest of a generation's
// parts, the deltas) and its own delta. Sessions come back in slot
// order, not st's, and Seen rounded down to stateSeenGrid.
func (s *Store) PutAllocState(ctx context.Context, region string, st *AllocState) error {
	if err := checkState(region, st); err != nil {
		return err
	}
	lw := s.writerFor(region, st.Instance, time.Now())
	defer lw.Unlock()
	if _, err := putState(ctx, etcdStates{s: s, region: region, instance: st.Instance}, st, &lw.w); err != nil {
		return fmt.Errorf("store: publish allocation state of %s: %w", region, err)
	}
	return nil
}

// putState queues st's publication in w and stores what w has queued,
// starting a generation when the stored head is not w's; it says whether
// it started one.
func putState(ctx context.Context, sink stateSink, st *AllocState, w *stateWriter) (generation bool, err error) {
	if generation, err = w.add(st); err != nil {
		return generation, err
	}
	err = w.flush(ctx, sink)
	if errors.Is(err, errHeadMoved) {
		generation = true
		if err := w.generation(st); err != nil {
			w.forget()
			return generation, err
		}
		err = w.flush(ctx, sink)
	}
	return generation, err
}

// etcdStates stores one instance's plan state of a region in etcd.
type etcdStates struct {
	s                *Store
	region, instance string
}

func (e etcdStates) key(k string) string { return e.s.prefix + k }

func (e etcdStates) putPart(ctx context.Context, gen uint64, k int, v []byte) (int64, error) {
	resp, err := e.s.cli.Put(ctx, e.key(keyspace.AllocStateBase(e.region, e.instance, gen, k)), string(v))
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

func (e etcdStates) storedParts(ctx context.Context, gen uint64) (map[int]int64, error) {
	bases := e.key(keyspace.AllocStateBases(e.region, e.instance, gen))
	resp, err := e.s.cli.Get(ctx, bases, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	out := map[int]int64{}
	for _, kv := range resp.Kvs {
		if k, err := strconv.Atoi(string(kv.Key[len(bases):])); err == nil {
			out[k] = kv.ModRevision
		}
	}
	return out, nil
}

func (e etcdStates) deltaOps(gen uint64, deltas []queued, head []byte) []clientv3.Op {
	ops := make([]clientv3.Op, 0, len(deltas)+4)
	for _, q := range deltas {
		ops = append(ops, clientv3.OpPut(e.key(keyspace.AllocStateDelta(e.region, e.instance, gen, q.seq)), string(q.delta)))
	}
	return append(ops, clientv3.OpPut(e.key(keyspace.AllocStateHead(e.region, e.instance)), string(head)))
}

func (e etcdStates) commit(ctx context.Context, gen uint64, partRev []int64, deltas []queued, head []byte) (bool, int64, error) {
	cmps := make([]clientv3.Cmp, len(partRev))
	for k, rev := range partRev {
		cmps[k] = clientv3.Compare(clientv3.ModRevision(e.key(keyspace.AllocStateBase(e.region, e.instance, gen, k))), "=", rev)
	}
	all, headKey := e.key(keyspace.AllocState(e.region, e.instance)), e.key(keyspace.AllocStateHead(e.region, e.instance))
	bases, ds := e.key(keyspace.AllocStateBases(e.region, e.instance, gen)), e.key(keyspace.AllocStateDeltas(e.region, e.instance, gen))
	// Everything of the instance's but the head, this generation's parts
	// and its deltas (etcd refuses a transaction that deletes a key it
	// puts): the previous generation, generations never finished, the
	// older format's parts.
	ops := append(e.deltaOps(gen, deltas, head),
		clientv3.OpDelete(all, clientv3.WithRange(bases)),
		clientv3.OpDelete(clientv3.GetPrefixRangeEnd(bases), clientv3.WithRange(ds)),
		clientv3.OpDelete(clientv3.GetPrefixRangeEnd(ds), clientv3.WithRange(headKey)),
		clientv3.OpDelete(headKey+"\x00", clientv3.WithRange(clientv3.GetPrefixRangeEnd(all))),
	)
	resp, err := e.s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return false, 0, err
	}
	return resp.Succeeded, resp.Header.Revision, nil
}

func (e etcdStates) extend(ctx context.Context, gen uint64, rev int64, deltas []queued, head []byte) (bool, int64, []byte, int64, error) {
	headKey := e.key(keyspace.AllocStateHead(e.region, e.instance))
	resp, err := e.s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(headKey), "=", rev)).
		Then(e.deltaOps(gen, deltas, head)...).Else(clientv3.OpGet(headKey)).Commit()
	switch {
	case err != nil:
		return false, 0, nil, 0, err
	case resp.Succeeded:
		return true, resp.Header.Revision, nil, 0, nil
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		return false, 0, kvs[0].Value, kvs[0].ModRevision, nil
	}
	return false, 0, nil, 0, nil
}

// DeleteAllocState removes instance's state of region.
func (s *Store) DeleteAllocState(ctx context.Context, region, instance string) error {
	lw := s.writerFor(region, instance, time.Now())
	lw.w.forget()
	lw.Unlock()
	_, err := s.cli.Delete(ctx, s.prefix+keyspace.AllocState(region, instance), clientv3.WithPrefix())
	return err
}

// The bounds of reading a region's plan states. Whoever holds a city's
// etcd identity may write any number of keys under its own instance's
// prefix, and the center reads them all when the city falls: so the keys
// are listed first (at most stateMaxKeys for the region), the heads read
// and the freshest chosen, its completeness checked from the keys, and
// only then its values read and decoded, at most stateMaxTotalRaw bytes
// once decompressed. A state an older build wrote (gzipped JSON parts) is
// read only from an instance with at most stateMaxLegacyParts of them.
const (
	stateMaxKeys        = 4 * (stateMaxParts + stateMaxDeltas)
	stateMaxTotalRaw    = 1 << 30
	stateMaxLegacyParts = 256
)

// AllocState returns the freshest state of region published by an
// instance other than except (nil if none). The freshest one must be
// whole: a head whose parts or deltas are missing or do not add up is an
// error naming the instance and what is wrong, not a reason to take an
// older one. A state in the gzipped JSON parts of an older build is read
// as that build did (a generation being written is passed over).
func (s *Store) AllocState(ctx context.Context, region, except string) (*AllocState, error) {
	pre := s.statePrefix(region)
	list, err := s.cli.Get(ctx, pre, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(stateMaxKeys+1))
	if err != nil {
		return nil, fmt.Errorf("store: read allocation states of %s: %w", region, err)
	}
	if list.More || len(list.Kvs) > stateMaxKeys {
		return nil, fmt.Errorf("store: allocation states of %s: %d keys, more than the %d a region's states may have: not read (an instance writing without bound?)", region, list.Count, stateMaxKeys)
	}
	at := clientv3.WithRev(list.Header.Revision) // every later read sees what was listed
	type stored struct {
		hasHead      bool
		head         *head
		keys         map[string]bool // the rest of the key, base parts and deltas
		legacy       []string        // whole keys
		legacyLatest *AllocState
	}
	byInst := map[string]*stored{}
	for _, kv := range list.Kvs {
		inst, rest, _ := strings.Cut(string(kv.Key[len(pre):]), "/")
		if inst == except {
			continue
		}
		in := byInst[inst]
		if in == nil {
			in = &stored{keys: map[string]bool{}}
			byInst[inst] = in
		}
		switch {
		case rest == "h":
			in.hasHead = true
		case strings.HasPrefix(rest, "b/"), strings.HasPrefix(rest, "d/"):
			in.keys[rest] = true
		default:
			in.legacy = append(in.legacy, string(kv.Key))
		}
	}
	var best *AllocState
	var bestInst string
	legacyBudget := stateMaxTotalRaw // every instance's older-format parts, decompressed
	for inst, in := range byInst {
		if !in.hasHead {
			if len(in.legacy) > stateMaxLegacyParts {
				return nil, fmt.Errorf("store: allocation state of %s by %s: %d parts in the older format, more than %d: not read", region, inst, len(in.legacy), stateMaxLegacyParts)
			}
			kvs, err := s.values(ctx, in.legacy, at)
			if err != nil {
				return nil, fmt.Errorf("store: allocation state of %s by %s: %w", region, inst, err)
			}
			st, err := legacyState(kvs, &legacyBudget)
			if err != nil {
				return nil, fmt.Errorf("store: allocation state of %s by %s: %w", region, inst, err)
			}
			in.legacyLatest = st
			if st != nil && (best == nil || st.Made.After(best.Made)) {
				best, bestInst = st, inst
			}
			continue
		}
		kvs, err := s.values(ctx, []string{pre + inst + "/h"}, at)
		if err != nil {
			return nil, fmt.Errorf("store: allocation state of %s by %s: head: %w", region, inst, err)
		}
		if len(kvs) == 0 {
			continue
		}
		h, err := decodeHead(kvs[0].Value)
		if err != nil {
			return nil, fmt.Errorf("store: allocation state of %s by %s: head: %w", region, inst, err)
		}
		if h.instance != inst {
			return nil, fmt.Errorf("store: allocation state of %s by %s: the head names instance %q", region, inst, h.instance)
		}
		in.head = h
		made := time.Unix(0, h.made)
		if best == nil || made.After(best.Made) {
			best, bestInst = &AllocState{Made: made}, inst
		}
	}
	if best == nil {
		return nil, nil
	}
	in := byInst[bestInst]
	if in.head == nil {
		return in.legacyLatest, nil
	}
	// Whole, from the keys, before a value is read.
	h := in.head
	want := make([]string, 0, h.baseParts+h.seq)
	rel := keyspace.AllocState("", "")
	for k := range h.baseParts {
		key := strings.TrimPrefix(keyspace.AllocStateBase("", "", h.gen, k), rel)
		if !in.keys[key] {
			return nil, fmt.Errorf("store: allocation state of %s by %s: base part %d of %d of generation %016x missing", region, bestInst, k, h.baseParts, h.gen)
		}
		want = append(want, pre+bestInst+"/"+key)
	}
	for q := 1; q <= h.seq; q++ {
		key := strings.TrimPrefix(keyspace.AllocStateDelta("", "", h.gen, q), rel)
		if !in.keys[key] {
			return nil, fmt.Errorf("store: allocation state of %s by %s: delta %d of %d of generation %016x missing", region, bestInst, q, h.seq, h.gen)
		}
		want = append(want, pre+bestInst+"/"+key)
	}
	kvs, err := s.values(ctx, want, at)
	if err != nil {
		return nil, fmt.Errorf("store: allocation state of %s by %s: %w", region, bestInst, err)
	}
	if len(kvs) != len(want) {
		return nil, fmt.Errorf("store: allocation state of %s by %s: %d of its %d parts and deltas read", region, bestInst, len(kvs), len(want))
	}
	vals := make([][]byte, len(kvs))
	for i, kv := range kvs {
		vals[i] = kv.Value
	}
	st, err := reconstruct(h, vals[:h.baseParts], vals[h.baseParts:])
	if err != nil {
		return nil, fmt.Errorf("store: allocation state of %s by %s: %w", region, bestInst, err)
	}
	return st, nil
}

// values reads keys (in order, each at most one value of stateValueBytes)
// with opts, a few hundred to a transaction.
func (s *Store) values(ctx context.Context, keys []string, opts ...clientv3.OpOption) ([]*mvccpb.KeyValue, error) {
	out := make([]*mvccpb.KeyValue, 0, len(keys))
	for len(keys) > 0 {
		n := min(len(keys), 64)
		ops := make([]clientv3.Op, n)
		for i, k := range keys[:n] {
			ops[i] = clientv3.OpGet(k, opts...)
		}
		resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, err
		}
		for i, r := range resp.Responses {
			for _, kv := range r.GetResponseRange().Kvs {
				if len(kv.Value) > stateValueBytes+4096 {
					return nil, fmt.Errorf("%s: %d bytes, more than a part's %d", keys[i], len(kv.Value), stateValueBytes)
				}
				out = append(out, kv)
			}
		}
		keys = keys[n:]
	}
	return out, nil
}

// statePart is one part of the gzipped JSON layout: parts were written in
// order, each naming the generation it belongs to, so a reader takes only
// complete ones.
type statePart struct {
	Gen   int64       `json:"gen"`
	Part  int         `json:"part"`
	Parts int         `json:"parts"`
	State *AllocState `json:"state"` // part 0 carries everything but the later parts' sessions
}

// legacyState is the freshest complete generation among one instance's
// gzipped JSON parts (nil: none complete).
func legacyState(kvs []*mvccpb.KeyValue, budget *int) (*AllocState, error) {
	type gen struct {
		parts map[int]*AllocState
		n     int
	}
	gens := map[int64]*gen{}
	for _, kv := range kvs {
		p, err := decodePart(kv.Value, budget)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kv.Key, err)
		}
		g := gens[p.Gen]
		if g == nil {
			g = &gen{parts: map[int]*AllocState{}, n: p.Parts}
			gens[p.Gen] = g
		}
		g.parts[p.Part] = p.State
	}
	var best *AllocState
	for _, g := range gens {
		if len(g.parts) != g.n || g.parts[0] == nil {
			continue // being written: an older or another instance's will do
		}
		st := *g.parts[0]
		for i := 1; i < g.n; i++ {
			st.Sessions = append(st.Sessions, g.parts[i].Sessions...)
		}
		if best == nil || st.Made.After(best.Made) {
			best = &st
		}
	}
	return best, nil
}

// legacyPartRaw bounds one older-format part decompressed: its writer cut
// parts of 10,000 sessions, about 2 MB of JSON.
const legacyPartRaw = 16 << 20

func decodePart(val []byte, budget *int) (*statePart, error) {
	if err := newerState(val); err != nil { // under a key this build does not know
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(val))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(zr, int64(min(legacyPartRaw, max(*budget, 0)))+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > legacyPartRaw {
		return nil, fmt.Errorf("over %d bytes decompressed", legacyPartRaw)
	}
	if *budget -= len(raw); *budget < 0 {
		return nil, fmt.Errorf("over %d bytes decompressed in all", stateMaxTotalRaw)
	}
	var p statePart
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	if p.State == nil || p.Parts < 1 || p.Part < 0 || p.Part >= p.Parts {
		return nil, fmt.Errorf("part %d of %d without a state", p.Part, p.Parts)
	}
	return &p, nil
}
