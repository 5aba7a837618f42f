package allocator

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/anysched/anysched/internal/alloc"
	"github.com/anysched/anysched/internal/topology"
)

// key identifies a session: one viewer (the token's subject, or the STB's
// address when it sent no token) watching one channel of one service.
type key struct {
	service int32
	user    string
	addr    netip.Addr
	channel string
}

// assignment is where a session was sent: a server of snap (or Fallback) at
// a ladder rung. Plans share theirs with the sessions they place.
type assignment struct {
	snap   *topology.Snapshot
	server int32 // snapshot index; alloc.Fallback for the regional fallback
	rung   int
	kbps   float64
}

// session is one live (user, channel).
type session struct {
	key     key
	profile alloc.Profile
	loc     topology.Location
	zone    int32 // snapshot zone index of loc (or -1: the region's centre)
	snap    *topology.Snapshot
	seen    atomic.Int64 // unix nanoseconds of the last request
	cur     atomic.Pointer[assignment]
}

const shards = 64

// table holds the live sessions, sharded so requests on different sessions
// do not contend.
type table struct {
	seed  maphash.Seed
	max   int64
	count atomic.Int64
	shard [shards]struct {
		mu sync.Mutex
		m  map[key]*session
	}
}

func newTable(max int) *table {
	t := &table{seed: maphash.MakeSeed(), max: int64(max)}
	for i := range t.shard {
		t.shard[i].m = map[key]*session{}
	}
	return t
}

func (t *table) shardOf(k *key) int {
	var h maphash.Hash
	h.SetSeed(t.seed)
	h.WriteString(k.user)
	h.WriteString(k.channel)
	b := k.addr.As16()
	h.Write(b[:])
	return int(h.Sum64() % shards)
}

// touch returns k's session, creating it (or replacing it when the viewer's
// profile or place changed), and marks it seen at now. It returns nil when
// the table is full: the request is still answered, the session is not
// planned.
func (t *table) touch(k key, prof alloc.Profile, loc topology.Location, zone int32, snap *topology.Snapshot, now int64) *session {
	sh := &t.shard[t.shardOf(&k)]
	sh.mu.Lock()
	s := sh.m[k]
	if s != nil && (s.profile != prof || s.loc != loc) {
		n := &session{key: k, profile: prof, loc: loc, zone: zone, snap: snap}
		n.cur.Store(s.cur.Load()) // the viewer is still where it was
		sh.m[k], s = n, n
	} else if s == nil {
		if t.count.Load() >= t.max {
			sh.mu.Unlock()
			return nil
		}
		s = &session{key: k, profile: prof, loc: loc, zone: zone, snap: snap}
		sh.m[k] = s
		t.count.Add(1)
	}
	sh.mu.Unlock()
	s.seen.Store(now)
	return s
}

// sweep drops sessions not seen since cutoff and returns the others.
func (t *table) sweep(cutoff int64) []*session {
	out := make([]*session, 0, t.count.Load())
	for i := range t.shard {
		sh := &t.shard[i]
		sh.mu.Lock()
		for k, s := range sh.m {
			if s.seen.Load() < cutoff {
				delete(sh.m, k)
				t.count.Add(-1)
				continue
			}
			out = append(out, s)
		}
		sh.mu.Unlock()
	}
	return out
}
