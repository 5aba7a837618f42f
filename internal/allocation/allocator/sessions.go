package allocator

import (
	"hash/maphash"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/anysched/anysched/internal/allocation/qoe"
	"github.com/anysched/anysched/internal/province/topology"
)

// key identifies a session: one viewer (the token's subject, "" without a
// token) on one STB (its address) watching one channel of one service.
type key struct {
	service int32
	user    string
	addr    netip.Addr
	channel string
}

// viewer is a key without the channel: an STB plays one channel at a time,
// so a viewer's new session ends its previous one.
type viewer struct {
	service int32
	user    string
	addr    netip.Addr
}

func (k *key) viewer() viewer { return viewer{k.service, k.user, k.addr} }

// on is the viewer's key on channel ch.
func (v viewer) on(ch string) key { return key{v.service, v.user, v.addr, ch} }

// assignment is where a session was sent: a server of snap (or Fallback) at
// a ladder rung. Plans share theirs with the sessions they place.
type assignment struct {
	snap   *topology.Snapshot
	gen    uint64 // the plan whose capacity accounts for it
	server int32  // snapshot index; qoe.Fallback for the regional fallback
	rung   int
	kbps   float64
}

// session is one live (user, channel). What a period's sweep, grouping
// and split read of each of 600,000 sessions comes first, together (the
// key's service is the first field after them), so that a pass over the
// sessions costs about one cache line a session, not three.
type session struct {
	snap *topology.Snapshot // the one its service index refers to
	cur  atomic.Pointer[assignment]
	seen atomic.Int64 // unix nanoseconds of the last request
	// planned is where the plan of its generation puts the session (plans
	// share one assignment per server and rung).
	planned atomic.Uint64 // planned(gen, place); plan.plannedOf reads it
	// The solver's own (solveMu): the number the grouping that last saw
	// the session gave its static class (place, profile, channel), so
	// that a steady period finds it without hashing strings and floats.
	numberedBy uint32 // the grouping's numbering (0: none yet)
	static     int32
	key        key
	profile    qoe.Profile
	loc        topology.Location
	placed     atomic.Int64 // unix nanoseconds cur was last given to the STB
	// released is the plan generation whose capacity it gave back when it
	// ended, so that it is given back once.
	released atomic.Uint64
}

const shards = 64

// switched is one switch of channel: the session it ended and the one
// that followed (nil when the table was full).
type switched struct{ ended, next *session }

// table holds the live sessions, sharded so requests on different sessions
// do not contend.
type table struct {
	seed  maphash.Seed
	max   int64
	count atomic.Int64
	shard [shards]struct {
		mu      sync.Mutex
		m       map[key]*session
		playing map[viewer]string // the viewer's current session's channel (its key less the viewer)
		// ended: the switches of channel since the last sweep. A plan
		// solved from that sweep still holds the ended sessions' capacity
		// and not their successors' (the switch gave back and priced in
		// the plan before): takeEnded.
		ended []switched
	}
}

func newTable(max int) *table {
	t := &table{seed: maphash.MakeSeed(), max: int64(max)}
	for i := range t.shard {
		t.shard[i].m = map[key]*session{}
		t.shard[i].playing = map[viewer]string{}
	}
	return t
}

// reserve makes room for n more sessions in shards that hold none yet:
// a planner taking over a fallen city adopts its 600,000 sessions at once,
// and growing the maps a rehash at a time was a third of the takeover.
func (t *table) reserve(n int) {
	per := n/shards + n/shards/8 + 1
	for i := range t.shard {
		sh := &t.shard[i]
		sh.mu.Lock()
		if len(sh.m) == 0 && len(sh.playing) == 0 {
			sh.m, sh.playing = make(map[key]*session, per), make(map[viewer]string, per)
		}
		sh.mu.Unlock()
	}
}

// shardOf hashes the viewer, not the channel: a viewer's sessions share a
// shard, so switching channel is one critical section.
func (t *table) shardOf(k *key) int {
	var h maphash.Hash
	h.SetSeed(t.seed)
	h.WriteString(k.user)
	b := k.addr.As16()
	h.Write(b[:])
	return int(h.Sum64() % shards)
}

// touch returns k's session, creating it (or replacing it when the viewer's
// profile or place changed), and marks it seen at now. When the viewer was
// playing another channel, that session ends and is returned as ended, so
// its capacity can be given back. s is nil when the table is full: the
// request is still answered, the session is not planned.
func (t *table) touch(k key, prof qoe.Profile, loc topology.Location, snap *topology.Snapshot, now int64) (s, ended *session) {
	sh := &t.shard[t.shardOf(&k)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	v := k.viewer()
	if ch, ok := sh.playing[v]; ok && ch != k.channel {
		prev := v.on(ch)
		if old := sh.m[prev]; old != nil {
			delete(sh.m, prev)
			t.count.Add(-1)
			ended = old
		}
	}
	s = sh.m[k]
	if s != nil && (s.profile != prof || s.loc != loc) {
		n := &session{key: k, profile: prof, loc: loc, snap: snap}
		n.cur.Store(s.cur.Load()) // the viewer is still where it was
		n.planned.Store(s.planned.Load())
		sh.m[k], s = n, n
	} else if s == nil {
		if t.count.Load() >= t.max {
			delete(sh.playing, v)
			if ended != nil {
				sh.ended = append(sh.ended, switched{ended, nil})
			}
			return nil, ended
		}
		s = &session{key: k, profile: prof, loc: loc, snap: snap}
		sh.m[k] = s
		t.count.Add(1)
	}
	sh.playing[v] = k.channel
	s.seen.Store(now)
	if ended != nil {
		sh.ended = append(sh.ended, switched{ended, s})
	}
	return s, ended
}

// sweep drops sessions not seen since cutoff and returns the others. The
// shards are swept in parallel (a city's 600,000 sessions are a pass of
// cache misses), each into its own list, then joined in shard order.
func (t *table) sweep(cutoff int64) []*session {
	var kept [shards][]*session
	inParallel(shards, 8, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			sh := &t.shard[i]
			sh.mu.Lock()
			clear(sh.ended) // before this sweep: not in what it returns
			sh.ended = sh.ended[:0]
			out := make([]*session, 0, len(sh.m))
			for k, s := range sh.m {
				if s.seen.Load() < cutoff {
					delete(sh.m, k)
					if ch, ok := sh.playing[k.viewer()]; ok && ch == k.channel {
						delete(sh.playing, k.viewer())
					}
					t.count.Add(-1)
					continue
				}
				out = append(out, s)
			}
			sh.mu.Unlock()
			kept[i] = out
		}
	})
	n := 0
	for _, k := range kept {
		n += len(k)
	}
	out := make([]*session, 0, n)
	for _, k := range kept {
		out = append(out, k...)
	}
	return out
}

// takeEnded returns the switches of channel since the last sweep (or the
// last takeEnded), and forgets them.
func (t *table) takeEnded() []switched {
	var out []switched
	for i := range t.shard {
		sh := &t.shard[i]
		sh.mu.Lock()
		out = append(out, sh.ended...)
		clear(sh.ended)
		sh.ended = sh.ended[:0]
		sh.mu.Unlock()
	}
	return out
}

// inParallel runs fn over [0, n) in chunks of at least least items on up
// to GOMAXPROCS goroutines, this one included. Workers take chunks from a
// counter, so that one descheduled on a shared machine costs its chunk,
// not an equal share of the work.
func inParallel(n, least int, fn func(lo, hi int)) {
	least = max(least, 1)
	workers := min(runtime.GOMAXPROCS(0), (n+least-1)/least)
	if workers <= 1 {
		fn(0, n)
		return
	}
	chunk := max(least, n/(8*workers))
	var next atomic.Int64
	work := func() {
		for {
			lo := int(next.Add(int64(chunk))) - chunk
			if lo >= n {
				return
			}
			fn(lo, min(lo+chunk, n))
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
}

// adopt puts a session another planner had (a published state) into the
// table with the place it was sent to at seen, unless this table placed
// or saw the viewer more recently. It returns whether it did.
func (t *table) adopt(k key, prof qoe.Profile, loc topology.Location, snap *topology.Snapshot, seen int64, cur *assignment) bool {
	sh := &t.shard[t.shardOf(&k)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	v := k.viewer()
	if ch, ok := sh.playing[v]; ok {
		prev := v.on(ch)
		old := sh.m[prev]
		switch {
		case old == nil:
		case prev == k:
			// Known here: the other planner's place wins if it is newer
			// than where this table last sent the STB (its requests here
			// since, if any, were unplanned).
			if old.placed.Load() >= seen {
				return false
			}
			old.cur.Store(cur)
			old.placed.Store(seen)
			return true
		case old.seen.Load() >= seen:
			return false // on another channel here since
		default:
			delete(sh.m, prev)
			t.count.Add(-1)
		}
	}
	if t.count.Load() >= t.max {
		return false
	}
	s := &session{key: k, profile: prof, loc: loc, snap: snap}
	s.cur.Store(cur)
	s.seen.Store(seen)
	s.placed.Store(seen)
	sh.m[k] = s
	sh.playing[v] = k.channel
	t.count.Add(1)
	return true
}
