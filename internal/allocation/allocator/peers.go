package allocator

import (
	"context"
	"time"

	"github.com/anysched/anysched/internal/province/store"
)

// The instance among its region's peers: their claims' changes, the
// rank rules, and how a solve may use the capacity.

// watcher is a Board that reports its peers' changes (store.ClaimBoard).
type watcher interface {
	Watch(ctx context.Context, fn func(instance string, c *store.Claims)) error
}

// watchPeers solves at once when a peer of the region goes idle or
// active, starts or stops, or is starved: capacity changes hands then,
// and waiting for the next period would leave STBs without it.
func (a *Allocator) watchPeers(ctx context.Context, w watcher) {
	type flags struct {
		idle, starved bool
		rank          int
	}
	seen := map[string]flags{}
	_ = w.Watch(ctx, func(id string, c *store.Claims) {
		old, had := seen[id]
		if c == nil {
			delete(seen, id)
			if had {
				a.Kick()
			}
			return
		}
		f := flags{c.Idle, c.Starved, c.Rank}
		seen[id] = f
		if had && f.idle && !old.idle {
			// It published its sessions as it went idle: take the ones it
			// saw last (the STBs it had that have not asked here yet).
			a.adoptNext.Store(true)
		}
		if !had || f != old {
			a.Kick()
		}
	})
}

// mode is how one solve may use the region's capacity.
type mode struct {
	yield bool // idle: a better-ranked peer takes the STBs
	safe  bool // the claims could not be read
	whole bool // safe, and ranked first: the whole capacity
	idle  bool // no STB lately: plan nobody, claim the reserve only
}

// firstInRank reports whether this instance was ranked before every peer
// whose claims it last read (false before it read any).
func (a *Allocator) firstInRank() bool {
	f := a.figures.Load()
	if f == nil {
		return false
	}
	for _, pc := range f.peers {
		if pc.Rank <= a.cfg.Rank {
			return false
		}
	}
	return true
}

// asTaking is this instance's claims as of now, taking STBs: what the
// rank rules (store.Claims.Yielding, Outdated) compare peers with.
func (a *Allocator) asTaking(now time.Time) store.Claims {
	return store.Claims{Rank: a.cfg.Rank, Made: now.UnixMilli()}
}

// freshClaims is how old a peer's claims may be for it to count as
// planning: two periods and a second (clocks differ a little).
func (a *Allocator) freshClaims() time.Duration { return 2*a.cfg.Period + time.Second }

// fairShare is this instance's share of a server when a peer is starved:
// in proportion to the sessions each plans (this instance's counted now),
// so an idle standby yields everything; 1 when no peer is starved.
func fairShare(live []*session, peers map[string]store.Claims) float64 {
	starved, total := false, 0
	for _, pc := range peers {
		starved = starved || pc.Starved
		total += pc.Sessions
	}
	switch {
	case !starved:
		return 1
	case len(live)+total == 0:
		return 1 // a starved peer planning nothing: nothing to divide by
	}
	return float64(len(live)) / float64(len(live)+total)
}
