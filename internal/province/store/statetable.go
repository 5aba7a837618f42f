package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"time"
)

// stateWriterDeltas: after this many deltas the writer starts a new
// generation even if they are small (a reader applies them all).
const stateWriterDeltas = 240

// stateTxnBytes bounds what one transaction carries (deltas and the
// head), below etcd's 1.5 MiB request limit.
const stateTxnBytes = 1_300_000

// stateTxnDeltas bounds the deltas of one transaction, and
// stateWriterParts a generation's base parts, which its head's
// transaction compares one by one: etcd takes 128 operations and 128
// comparisons a transaction by default (its --max-txn-ops), and the head
// and the deletions are four more operations.
const (
	stateTxnDeltas   = 120
	stateWriterParts = 120
)

// step is a time in unix milliseconds in stateSeenGrid steps, rounded down.
func step(ms int64) int64 {
	q := ms / stateSeenGrid
	if ms%stateSeenGrid < 0 {
		q--
	}
	return q
}

// queued is a delta not known to be stored yet, with the head naming it
// (the head of the publication that made it).
type queued struct {
	seq         int
	delta, head []byte
}

// stateWriter is what a store remembers of one instance's published state
// of one region, to write the next publication as a delta. gen 0: nothing
// remembered, the next publication starts a generation.
//
// A publication updates what the writer remembers at once and queues what
// it has to write; flush writes what is queued and drops what it knows to
// be stored. So a publication that fails part way (an etcd too slow for
// the caller's deadline) leaves the rest queued, and the next one writes
// that rest and its own delta, not a whole new generation: the bytes of
// a failure are at most the request in flight, written again.
type stateWriter struct {
	used time.Time // the last publication, to forget idle writers
	seed maphash.Seed
	// partBytes bounds a base part (0: stateValueBytes); the tests make
	// it small to have many parts of few sessions.
	partBytes int

	// headRev is the stored head's mod revision, as this writer wrote or
	// found it (0: the generation's head not stored yet): a delta is
	// guarded by it.
	headRev int64
	// parts are the generation's base parts until its head is stored,
	// partRev each one's mod revision once stored (0: not known), and
	// unsure says a write failed, so which of them are stored has to be
	// read before the rest are written. genHead is the head naming the
	// base alone.
	parts   [][]byte
	partRev []int64
	unsure  bool
	genHead []byte
	// queue holds the deltas not known to be stored, oldest first.
	queue []queued

	gen                   uint64
	seq                   int
	baseBytes, deltaBytes int // since the base, compressed
	baseParts             int
	t                     *tables
	slots                 []slot
	free                  []int32
	byKey                 map[uint64]int32
	sum                   uint64
	live                  int
	buf                   []byte
}

type slotKey struct {
	service, channel int32
	user             string
	addr             [16]byte
	zone             string
	is4              bool
}

func (w *stateWriter) key(s *slot) uint64 {
	return maphash.Comparable(w.seed, slotKey{service: s.service, channel: s.channel, user: s.user, addr: s.addr.As16(), zone: s.addr.Zone(), is4: s.addr.Is4()})
}

func (w *stateWriter) viewer(s *slot) uint64 {
	return maphash.Comparable(w.seed, slotKey{service: s.service, channel: -1, user: s.user, addr: s.addr.As16(), zone: s.addr.Zone(), is4: s.addr.Is4()})
}

// forget drops what the writer remembers and what it has not written:
// its next publication starts a new generation.
func (w *stateWriter) forget() {
	*w = stateWriter{used: w.used, seed: w.seed, partBytes: w.partBytes}
}

// checkState refuses what the format cannot carry, naming it.
func checkState(region string, st *AllocState) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("store: allocation state of %q: %s", region, fmt.Sprintf(format, args...))
	}
	switch {
	case region == "" || strings.Contains(region, "/"):
		return bad("a region name must be non-empty and without '/'")
	case st.Instance == "" || strings.Contains(st.Instance, "/") || len(st.Instance) > stateMaxString:
		return bad("instance %q: must be non-empty, without '/', at most %d bytes", st.Instance, stateMaxString)
	case len(st.Sessions) > stateMaxSlots:
		return bad("%d sessions, at most %d", len(st.Sessions), stateMaxSlots)
	}
	seen := map[string]bool{}
	for i, s := range st.Servers {
		if len(s) > stateMaxString || seen[s] {
			return bad("server %d (%.40q): longer than %d bytes or named twice", i, s, stateMaxString)
		}
		seen[s] = true
	}
	clear(seen)
	for i, sv := range st.Services {
		if len(sv.Name) > stateMaxString || seen[sv.Name] {
			return bad("service %d (%.40q): longer than %d bytes or named twice", i, sv.Name, stateMaxString)
		}
		seen[sv.Name] = true
	}
	for i := range st.Sessions {
		s := &st.Sessions[i]
		a, _ := s.Addr.MarshalBinary()
		switch {
		case s.Service < 0 || int(s.Service) >= len(st.Services):
			return bad("session %d: service %d of %d", i, s.Service, len(st.Services))
		case s.Server < -1 || int(s.Server) >= len(st.Servers):
			return bad("session %d: server %d of %d (-1: the fallback)", i, s.Server, len(st.Servers))
		case len(s.User) > stateMaxString || len(s.Channel) > stateMaxString || len(a) > stateMaxString:
			return bad("session %d: user, channel or address longer than %d bytes", i, stateMaxString)
		}
	}
	return nil
}

// convert turns st's sessions into slots with t's indices (t grows).
func convert(st *AllocState, t *tables) []slot {
	services := make([]int32, len(st.Services))
	for i, sv := range st.Services {
		services[i] = t.str(sv.Name)
	}
	servers := make([]int32, len(st.Servers))
	for i, s := range st.Servers {
		servers[i] = t.str(s)
	}
	out := make([]slot, len(st.Sessions))
	for i := range st.Sessions {
		s := &st.Sessions[i]
		sl := slot{live: true, user: s.User, addr: s.Addr, service: services[s.Service], channel: t.str(s.Channel), server: -1,
			profile: t.profile(s.Desired, s.Danmaku, s.Gift), location: t.location(s.Lat, s.Lon), kbps: t.num(s.Kbps), seen: step(s.Seen)}
		if s.Server >= 0 {
			sl.server = servers[s.Server]
		}
		out[i] = sl
	}
	return out
}

func (w *stateWriter) headOf(st *AllocState) *head {
	return &head{instance: st.Instance, gen: w.gen, seq: w.seq, made: st.Made.UnixNano(), revision: st.Revision, sessions: w.live,
		slots: len(w.slots), checksum: w.sum, baseParts: w.baseParts, servers: st.Servers, services: st.Services}
}

// add makes the publication of st and queues it: a delta when the writer
// remembers a generation and the delta is worth it, else a new
// generation (it says which). It updates what the writer remembers as if
// the publication were stored; flush stores it.
func (w *stateWriter) add(st *AllocState) (generation bool, err error) {
	if w.gen != 0 && w.seq < stateWriterDeltas {
		if q := w.delta(st); q != nil {
			w.queue = append(w.queue, *q)
			return false, nil
		}
	}
	if err := w.generation(st); err != nil {
		w.forget()
		return true, err
	}
	return true, nil
}

// generation starts a new generation with st: fresh tables, the slots
// numbered densely, the base in parts.
func (w *stateWriter) generation(st *AllocState) error {
	var g [8]byte
	for binary.LittleEndian.Uint64(g[:]) == 0 {
		_, _ = rand.Read(g[:]) // never fails (crypto/rand)
	}
	*w = stateWriter{used: w.used, seed: w.seed, partBytes: w.partBytes, gen: binary.LittleEndian.Uint64(g[:]), t: newTables(), byKey: map[uint64]int32{}}
	madeStep := step(st.Made.UnixMilli())
	recs := convert(st, w.t)
	w.slots = recs
	for i := range w.slots {
		s := &w.slots[i]
		if _, dup := w.byKey[w.key(s)]; !dup {
			w.byKey[w.key(s)] = int32(i)
		}
		var h uint64
		h, w.buf = w.t.checksum(s, w.buf)
		w.sum += h
	}
	w.live = len(w.slots)
	// Parts: records until the raw bytes reach a target that adapts to
	// how well the previous part compressed; a part over the bound is
	// made again with half the target. Each part carries the table
	// entries its records use first.
	limit := w.partBytes
	if limit == 0 {
		limit = stateValueBytes
	}
	target := 3 * limit
	var parts [][]byte
	var l lens
	for first := 0; first < len(recs) || len(parts) == 0; {
		var body []byte
		end := first
		for end < len(recs) && (len(body) < target || end == first) {
			body = appendFields(body, &recs[end], fAll)
			body = binary.AppendVarint(body, madeStep-recs[end].seen)
			end++
		}
		nl := lensThrough(recs[first:end], l)
		if end == len(recs) {
			nl = w.t.lens() // the names no session uses too: deltas extend the whole tables
		}
		b := binary.LittleEndian.AppendUint64(nil, w.gen)
		b = binary.AppendUvarint(b, uint64(len(parts)))
		b = binary.AppendUvarint(b, uint64(first))
		b = binary.AppendUvarint(b, uint64(end-first))
		b = binary.AppendVarint(b, madeStep)
		b = w.t.appendTablesBetween(b, l, nl)
		v := seal(kindBase, append(b, body...))
		if len(v) > limit && end-first > 1 {
			target = max(1, len(body)/2)
			continue
		}
		if len(v) > stateValueBytes {
			return fmt.Errorf("store: a plan state's session does not fit a value of %d bytes", stateValueBytes)
		}
		if len(parts) >= stateWriterParts {
			return fmt.Errorf("store: a plan state of %d sessions needs more than %d parts", len(recs), stateWriterParts)
		}
		parts = append(parts, v)
		w.baseBytes += len(v)
		if len(v) < limit/2 {
			target += target / 2
		}
		first, l = end, nl
	}
	w.baseParts = len(parts)
	w.parts, w.partRev, w.genHead = parts, make([]int64, len(parts)), w.headOf(st).encode()
	return nil
}

// lensThrough is the tables' lengths once recs are read, from l: entries
// are added in first-use order, so each is one past the largest index
// used so far.
func lensThrough(recs []slot, l lens) lens {
	for i := range recs {
		s := &recs[i]
		l.strs = max(l.strs, int(s.service)+1, int(s.channel)+1, int(s.server)+1)
		l.profiles = max(l.profiles, int(s.profile)+1)
		l.locations = max(l.locations, int(s.location)+1)
		l.nums = max(l.nums, int(s.kbps)+1)
	}
	return l
}

// appendTablesBetween writes the table entries from a up to b.
func (t *tables) appendTablesBetween(out []byte, a, b lens) []byte {
	sub := tables{strs: t.strs[:b.strs], locations: t.locations[:b.locations], profiles: t.profiles[:b.profiles], nums: t.nums[:b.nums]}
	return sub.appendTables(out, a)
}

// delta makes the next delta of the generation, updating the slots; nil
// when a new generation is better (the deltas would outgrow the base, or
// this one a transaction). Then what the writer remembers is stale: the
// caller starts a generation, which resets it.
func (w *stateWriter) delta(st *AllocState) *queued {
	before := w.t.lens()
	recs := convert(st, w.t)
	n := int32(len(w.slots))
	at := make([]int32, len(recs)) // the slot of each session, -1: none yet
	taken := make([]bool, n)
	for i := range recs {
		at[i] = -1
		if s, ok := w.byKey[w.key(&recs[i])]; ok && !taken[s] && w.slots[s].live && sameKey(&w.slots[s], &recs[i]) {
			at[i], taken[s] = s, true
		}
	}
	// A viewer who changed channel is a new session on the slot of the
	// one it ended: only the fields that differ are written.
	spare := map[uint64][]int32{}
	for s := range n {
		if w.slots[s].live && !taken[s] {
			v := w.viewer(&w.slots[s])
			spare[v] = append(spare[v], s)
		}
	}
	for i := range recs {
		if at[i] >= 0 || len(spare) == 0 {
			continue
		}
		v := w.viewer(&recs[i])
		for k, s := range spare[v] {
			if !taken[s] && sameViewer(&w.slots[s], &recs[i]) {
				at[i], taken[s] = s, true
				spare[v] = slices.Delete(spare[v], k, k+1)
				break
			}
		}
	}
	// The slots no session kept are emptied, or given to new sessions.
	var gone []int32
	for s := range n {
		if w.slots[s].live && !taken[s] {
			gone = append(gone, s)
		}
	}
	type set struct {
		slot int32
		mask uint8
	}
	var sets []set
	var seen []int32
	full := map[int32]bool{}
	for i := range recs {
		s := at[i]
		if s < 0 {
			switch {
			case len(gone) > 0:
				s, gone = gone[len(gone)-1], gone[:len(gone)-1]
			case len(w.free) > 0:
				s, w.free = w.free[len(w.free)-1], w.free[:len(w.free)-1]
			default:
				s = int32(len(w.slots))
				w.slots = append(w.slots, slot{})
			}
			full[s] = true
		}
		old, cur := &w.slots[s], &recs[i]
		mask := fAll
		if !full[s] {
			mask = changed(old, cur)
		}
		if mask == 0 && old.seen == cur.seen {
			continue
		}
		if old.live {
			var h uint64
			h, w.buf = w.t.checksum(old, w.buf)
			w.sum -= h
			if mask&(fService|fUser|fAddr|fChannel) != 0 {
				if k := w.key(old); w.byKey[k] == s {
					delete(w.byKey, k)
				}
			}
		} else {
			w.live++
		}
		if mask != 0 {
			sets = append(sets, set{s, mask})
		}
		if full[s] || old.seen != cur.seen {
			seen = append(seen, s)
		}
		*old = *cur
		var h uint64
		h, w.buf = w.t.checksum(old, w.buf)
		w.sum += h
		k := w.key(old)
		if cs, ok := w.byKey[k]; !ok || !w.slots[cs].live || !sameKey(&w.slots[cs], old) {
			w.byKey[k] = s
		}
	}
	for _, s := range gone {
		old := &w.slots[s]
		var h uint64
		h, w.buf = w.t.checksum(old, w.buf)
		w.sum -= h
		if k := w.key(old); w.byKey[k] == s {
			delete(w.byKey, k)
		}
		*old = slot{}
		w.live--
		w.free = append(w.free, s)
	}
	slices.Sort(gone)
	slices.SortFunc(sets, func(a, b set) int { return int(a.slot) - int(b.slot) })
	slices.Sort(seen)
	madeStep := step(st.Made.UnixMilli())
	w.seq++
	b := binary.LittleEndian.AppendUint64(nil, w.gen)
	b = binary.AppendUvarint(b, uint64(w.seq))
	b = binary.AppendVarint(b, madeStep)
	b = w.t.appendTables(b, before)
	b = binary.AppendUvarint(b, uint64(len(gone)))
	prev := int32(-1)
	for _, s := range gone {
		b, prev = binary.AppendUvarint(b, uint64(s-prev-1)), s
	}
	b = binary.AppendUvarint(b, uint64(len(sets)))
	prev = -1
	for _, e := range sets {
		b, prev = binary.AppendUvarint(b, uint64(e.slot-prev-1)), e.slot
		b = append(b, e.mask)
		b = appendFields(b, &w.slots[e.slot], e.mask)
	}
	b = binary.AppendUvarint(b, uint64(len(seen)))
	prev = -1
	for _, s := range seen {
		b, prev = binary.AppendUvarint(b, uint64(s-prev-1)), s
		b = binary.AppendVarint(b, madeStep-w.slots[s].seen)
	}
	v := seal(kindDelta, b)
	hv := w.headOf(st).encode()
	if w.deltaBytes+len(v) > w.baseBytes || len(v)+len(hv) > stateTxnBytes {
		return nil
	}
	w.deltaBytes += len(v)
	return &queued{seq: w.seq, delta: v, head: hv}
}

// stateSink is where a writer's publications are stored: etcd (the
// Store's), or memory (the format's tests). A method that fails may have
// stored what it was given: flush never takes a failed write for one that
// did not land.
type stateSink interface {
	// putPart stores base part k of generation gen; it returns the
	// part's mod revision.
	putPart(ctx context.Context, gen uint64, k int, v []byte) (int64, error)
	// storedParts is the mod revision of each stored base part of
	// generation gen, by part.
	storedParts(ctx context.Context, gen uint64) (map[int]int64, error)
	// commit stores deltas and head and deletes everything else of the
	// instance's, in one transaction, if generation gen's parts are
	// stored at the mod revisions partRev (ok); it returns the head's
	// mod revision.
	commit(ctx context.Context, gen uint64, partRev []int64, deltas []queued, head []byte) (ok bool, rev int64, err error)
	// extend stores deltas and head in one transaction if the head's mod
	// revision is rev (ok, and the head's new mod revision); otherwise it
	// returns the stored head (nil: none) and its mod revision.
	extend(ctx context.Context, gen uint64, rev int64, deltas []queued, head []byte) (ok bool, newRev int64, cur []byte, curRev int64, err error)
}

// errHeadMoved: the stored head is neither the one this writer stored
// last nor one it queued (deleted, or written by another process): the
// caller starts a generation.
var errHeadMoved = errors.New("the stored head is not this writer's")

// errPartsChanged: a base part of the generation being written changed
// before its head was stored; the next flush reads which are stored.
var errPartsChanged = errors.New("a base part changed before the head naming it was stored")

// flush stores what the writer has queued, in order: the generation's
// base parts not known to be stored, then its head with the first deltas
// (only once every part is stored, comparing them: a reader never finds
// a head whose parts are missing), then the other deltas, each
// transaction guarded by the head's mod revision. What it knows to be
// stored it drops; on an error the rest stays queued for the next flush.
// A delta transaction that failed yet landed is found by its head, which
// the next guard fails on.
func (w *stateWriter) flush(ctx context.Context, sink stateSink) error {
	if w.parts != nil {
		if w.unsure {
			stored, err := sink.storedParts(ctx, w.gen)
			if err != nil {
				return err
			}
			for k := range w.partRev {
				w.partRev[k] = stored[k]
			}
			w.unsure = false
		}
		for k, v := range w.parts {
			if w.partRev[k] != 0 {
				continue
			}
			rev, err := sink.putPart(ctx, w.gen, k, v)
			if err != nil {
				w.unsure = true
				return err
			}
			w.partRev[k] = rev
		}
		n := w.batch()
		head := w.genHead
		if n > 0 {
			head = w.queue[n-1].head
		}
		// A commit that failed is made again as it is: it stores the
		// same, so whether the failed one landed does not matter.
		ok, rev, err := sink.commit(ctx, w.gen, w.partRev, w.queue[:n], head)
		if err != nil {
			return err
		}
		if !ok {
			w.unsure = true
			return errPartsChanged
		}
		w.headRev, w.parts, w.partRev, w.genHead = rev, nil, nil, nil
		w.queue = w.queue[n:]
	}
	for len(w.queue) > 0 {
		n := w.batch()
		ok, rev, cur, curRev, err := sink.extend(ctx, w.gen, w.headRev, w.queue[:n], w.queue[n-1].head)
		if err != nil {
			return err
		}
		if ok {
			w.headRev, w.queue = rev, w.queue[n:]
			continue
		}
		j := slices.IndexFunc(w.queue, func(q queued) bool { return cur != nil && bytes.Equal(q.head, cur) })
		if j < 0 {
			return errHeadMoved
		}
		// A flush that failed had stored up to there.
		w.headRev, w.queue = curRev, w.queue[j+1:]
	}
	return nil
}

// batch is how many queued deltas, from the first, one transaction
// carries with the last one's head: as many as fit stateTxnBytes and
// stateTxnDeltas, and at least one (delta refuses one that would not fit
// with its head).
func (w *stateWriter) batch() int {
	size, n := 0, 0
	for n < len(w.queue) && n < stateTxnDeltas {
		size += len(w.queue[n].delta)
		if n > 0 && size+len(w.queue[n].head) > stateTxnBytes {
			break
		}
		n++
	}
	return n
}

// stateTable is the reader's reconstruction of a generation.
type stateTable struct {
	gen   uint64
	t     tables
	slots []slot
	live  int
	raw   int // bytes decompressed so far, at most stateMaxTotalRaw
}

// opened decompresses one value of the state, within the state's budget.
func (r *stateTable) opened(val []byte, kind byte) (*decoder, error) {
	d, err := open(val, kind)
	if err != nil {
		return nil, err
	}
	if r.raw += len(d.b); r.raw > stateMaxTotalRaw {
		return nil, fmt.Errorf("over %d bytes decompressed in all", stateMaxTotalRaw)
	}
	return d, nil
}

// base applies base part k; parts come in order.
func (r *stateTable) base(val []byte, k int) error {
	d, err := r.opened(val, kindBase)
	if err != nil {
		return err
	}
	return r.baseFrom(d, k)
}

func (r *stateTable) baseFrom(d *decoder, k int) error {
	if g := d.fixed64(); d.err == nil && g != r.gen {
		return fmt.Errorf("of generation %016x, the head's is %016x", g, r.gen)
	}
	if p := d.uvarint(); d.err == nil && p != uint64(k) {
		return fmt.Errorf("says it is part %d", p)
	}
	if first := d.uvarint(); d.err == nil && first != uint64(len(r.slots)) {
		return fmt.Errorf("starts at slot %d, the parts before end at %d", first, len(r.slots))
	}
	n := d.int(stateMaxSlots, "sessions")
	madeStep := d.varint()
	r.t.readTables(d)
	if d.err == nil && n > len(d.b)/9 { // a session is at least 9 bytes
		d.fail("%d sessions in %d bytes", n, len(d.b))
	}
	for range n {
		if d.err != nil {
			break
		}
		s := slot{live: true}
		readFields(d, &r.t, &s, fAll)
		s.seen = madeStep - d.varint()
		r.slots = append(r.slots, s)
		r.live++
	}
	if len(r.slots) > stateMaxSlots {
		d.fail("over %d slots", stateMaxSlots)
	}
	return d.done()
}

// delta applies delta seq; deltas come in order.
func (r *stateTable) delta(val []byte, seq int) error {
	d, err := r.opened(val, kindDelta)
	if err != nil {
		return err
	}
	return r.deltaFrom(d, seq)
}

func (r *stateTable) deltaFrom(d *decoder, seq int) error {
	if g := d.fixed64(); d.err == nil && g != r.gen {
		return fmt.Errorf("of generation %016x, the head's is %016x", g, r.gen)
	}
	if q := d.uvarint(); d.err == nil && q != uint64(seq) {
		return fmt.Errorf("says it is delta %d", q)
	}
	madeStep := d.varint()
	r.t.readTables(d)
	// Slots are gap-coded in increasing order; a set may add the slot one
	// past the end, everything else must name a live one.
	slotAt := func(prev *int64, grow bool) int {
		v := d.uvarint()
		if d.err != nil {
			return 0
		}
		s := *prev + 1 + int64(min(v, stateMaxSlots))
		*prev = s
		switch {
		case s < int64(len(r.slots)):
			return int(s)
		case grow && s == int64(len(r.slots)) && s < stateMaxSlots:
			r.slots = append(r.slots, slot{})
			return int(s)
		}
		d.fail("slot %d of %d", s, len(r.slots))
		return 0
	}
	n := d.count(1)
	prev := int64(-1)
	for range n {
		s := slotAt(&prev, false)
		if d.err == nil && !r.slots[s].live {
			d.fail("empties slot %d, which is empty", s)
		}
		if d.err != nil {
			break
		}
		r.slots[s] = slot{}
		r.live--
	}
	n = d.count(2)
	prev = -1
	for range n {
		s := slotAt(&prev, true)
		mask := d.byte()
		if d.err != nil {
			break
		}
		sl := &r.slots[s]
		switch {
		case mask == fAll && !sl.live:
			*sl = slot{live: true}
			r.live++
		case mask == 0 || (mask != fAll && !sl.live):
			d.fail("sets fields %08b of slot %d (live: %v)", mask, s, sl.live)
		}
		readFields(d, &r.t, sl, mask)
	}
	n = d.count(2)
	prev = -1
	for range n {
		s := slotAt(&prev, false)
		if d.err == nil && !r.slots[s].live {
			d.fail("sees slot %d, which is empty", s)
		}
		if d.err != nil {
			break
		}
		r.slots[s].seen = madeStep - d.varint()
	}
	return d.done()
}

// state checks the reconstruction against h and returns it.
func (r *stateTable) state(h *head) (*AllocState, error) {
	if r.live != h.sessions || len(r.slots) != h.slots {
		return nil, fmt.Errorf("%d sessions in %d slots, the head says %d in %d", r.live, len(r.slots), h.sessions, h.slots)
	}
	servers := make(map[string]int32, len(h.servers))
	for i, s := range h.servers {
		servers[s] = int32(i)
	}
	services := make(map[string]int32, len(h.services))
	for i, sv := range h.services {
		services[sv.Name] = int32(i)
	}
	st := &AllocState{Instance: h.instance, Made: time.Unix(0, h.made).UTC(), Revision: h.revision, Servers: h.servers, Services: h.services,
		Sessions: make([]SessionState, 0, r.live)}
	var sum uint64
	var buf []byte
	for i := range r.slots {
		s := &r.slots[i]
		if !s.live {
			continue
		}
		var c uint64
		c, buf = r.t.checksum(s, buf)
		sum += c
		svc, ok := services[r.t.strs[s.service]]
		if !ok {
			return nil, fmt.Errorf("slot %d: service %q, which the head does not list", i, r.t.strs[s.service])
		}
		server := int32(-1)
		if s.server >= 0 {
			if server, ok = servers[r.t.strs[s.server]]; !ok {
				return nil, fmt.Errorf("slot %d: server %q, which the head does not list", i, r.t.strs[s.server])
			}
		}
		p, l := r.t.profiles[s.profile], r.t.locations[s.location]
		st.Sessions = append(st.Sessions, SessionState{Service: svc, User: s.user, Addr: s.addr, Channel: r.t.strs[s.channel],
			Desired: p[0], Danmaku: p[1], Gift: p[2], Lat: l[0], Lon: l[1], Server: server, Kbps: r.t.nums[s.kbps], Seen: s.seen * stateSeenGrid})
	}
	if sum != h.checksum {
		return nil, errors.New("the sessions' checksum is not the head's: parts or deltas do not belong together")
	}
	return st, nil
}

// reconstruct decodes a whole stored state: the head, the base parts in
// order, the deltas in order.
func reconstruct(h *head, base, deltas [][]byte) (*AllocState, error) {
	if len(base) != h.baseParts || len(deltas) != h.seq {
		return nil, fmt.Errorf("%d base parts and %d deltas, the head says %d and %d", len(base), len(deltas), h.baseParts, h.seq)
	}
	r := &stateTable{gen: h.gen}
	for k, v := range base {
		if err := r.base(v, k); err != nil {
			return nil, fmt.Errorf("base part %d: %w", k, err)
		}
	}
	for i, v := range deltas {
		if err := r.delta(v, i+1); err != nil {
			return nil, fmt.Errorf("delta %d: %w", i+1, err)
		}
	}
	return r.state(h)
}
