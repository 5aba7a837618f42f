// Package etcdfeed follows keys in etcd: list them in one transaction, watch
// from the next revision, list again after any watch failure, and keep the
// last state meanwhile. It is the one way the schedulers follow etcd besides
// the topology pointer: health's Merger and opstate's Watcher are fed by one.
package etcdfeed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// KV is one key of a Feed, relative to the feed's prefix.
type KV struct {
	Key     string
	Value   []byte
	Deleted bool
	// Lease is the lease the key was written under (0: none; always 0 for
	// a deletion): the store's word on whose liveness the key shares.
	Lease int64
	// ModRevision is the revision of the write or deletion: the store's
	// order of writes, which no writer's clock can claim.
	ModRevision int64
}

// Feed follows some keys of the province: it lists them in one consistent
// read, then watches them from that revision, and lists again after any
// watch failure, so its follower converges after an etcd outage while the
// last known state stays in use. Both the health merger and the operator
// state Watcher are fed by one.
type Feed struct {
	Client *clientv3.Client
	Prefix string   // etcd.prefix
	Keys   []string // keys or key prefixes (ending in "/") under Prefix, from internal/etcd/keyspace
	// Listed replaces the follower's state with a full listing.
	Listed func(kvs []KV)
	// Updated applies watched changes and reports whether any mattered.
	Updated func(kvs []KV) bool
	// Changed is called after a listing, after updates that mattered, and
	// every Tick (state that expires with time, such as grace periods).
	Changed func()
	Tick    time.Duration // 0: no tick
	Logger  *slog.Logger  // already With the component
	// Retry is the pause after a failure (default 500ms).
	Retry time.Duration
	// Recheck is how often the store is asked whether it is still the
	// one listed (default 2s; see rebuilt).
	Recheck time.Duration
}

// errRebuilt: the store answering is not the one the feed listed.
var errRebuilt = errors.New("the store was rebuilt")

// storeMark is what tells one store from another as seen from a client:
// its cluster id, its raft term and the highest revision seen of it.
type storeMark struct {
	cluster, term uint64
	rev           int64
}

func markOf(h *etcdserverpb.ResponseHeader) storeMark {
	return storeMark{cluster: h.GetClusterId(), term: h.GetRaftTerm(), rev: h.GetRevision()}
}

// rebuilt says why now, a header of the store answering, is of another
// store than seen, the listing's and the watch's so far ("" when it is
// the same). A store lost whole and rebuilt numbers its revisions (and
// its raft terms) anew, and clientv3 resumes a watch on it silently from
// the revision after the last it delivered: nothing would come until the
// new store's revisions passed the lost one's, which for a store that
// lived is never. A store whose revision or term went back, or whose
// cluster id changed, is listed again. What this misses: a rebuilt store
// that wrote more revisions than the lost one had, and with the same
// cluster id, within one Recheck.
func rebuilt(seen storeMark, now *etcdserverpb.ResponseHeader) string {
	if now == nil || now.ClusterId == 0 {
		return "" // no word from the store
	}
	switch n := markOf(now); {
	case n.cluster != seen.cluster:
		return fmt.Sprintf("cluster id %x, was %x", n.cluster, seen.cluster)
	case n.rev < seen.rev:
		return fmt.Sprintf("revision %d, was %d", n.rev, seen.rev)
	case n.term < seen.term:
		return fmt.Sprintf("raft term %d, was %d", n.term, seen.term)
	}
	return ""
}

// Run follows etcd until ctx ends.
func (f *Feed) Run(ctx context.Context) error {
	retry := f.Retry
	if retry == 0 {
		retry = 500 * time.Millisecond
	}
	var tick <-chan time.Time
	if f.Tick > 0 {
		t := time.NewTicker(f.Tick)
		defer t.Stop()
		tick = t.C
	}
	failing := false
	for {
		err := f.follow(ctx, tick, func() {
			if failing {
				f.Logger.Info("feed restored", "keys", f.Keys)
				failing = false
			}
		})
		if ctx.Err() != nil {
			return nil
		}
		if !failing {
			f.Logger.Warn("lost the feed from etcd; keeping the last known state", "keys", f.Keys, "err", err)
		}
		failing = true
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
	}
}

// matches reports whether rel (a key relative to Prefix) is one of Keys.
func (f *Feed) matches(rel string) bool {
	for _, k := range f.Keys {
		if rel == k || (strings.HasSuffix(k, "/") && strings.HasPrefix(rel, k)) {
			return true
		}
	}
	return false
}

func (f *Feed) follow(ctx context.Context, tick <-chan time.Time, listed func()) error {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	ops := make([]clientv3.Op, len(f.Keys))
	for i, k := range f.Keys {
		if strings.HasSuffix(k, "/") {
			ops[i] = clientv3.OpGet(f.Prefix+k, clientv3.WithPrefix())
		} else {
			ops[i] = clientv3.OpGet(f.Prefix + k)
		}
	}
	// One transaction: every key read at the same revision.
	resp, err := f.Client.Txn(lctx).Then(ops...).Commit()
	cancel()
	if err != nil {
		return err
	}
	var kvs []KV
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().Kvs {
			kvs = append(kvs, KV{Key: strings.TrimPrefix(string(kv.Key), f.Prefix), Value: kv.Value, Lease: kv.Lease, ModRevision: kv.ModRevision})
		}
	}
	f.Listed(kvs)
	listed()
	f.Changed()
	seen := markOf(resp.Header)
	recheck := f.Recheck
	if recheck <= 0 {
		recheck = 2 * time.Second
	}
	checks := time.NewTicker(recheck)
	defer checks.Stop()
	// A watch on each key or prefix, not on the whole province: a
	// follower receives what it follows, not every plan state and claim
	// written (megabytes a second at a province's size), and needs read
	// permission on nothing else. Each key's events keep their order;
	// between keys, the order they arrive in.
	wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer wcancel()
	type batch struct {
		wr     clientv3.WatchResponse
		closed bool
	}
	merged := make(chan batch)
	for _, k := range f.Keys {
		opts := []clientv3.OpOption{clientv3.WithRev(resp.Header.Revision + 1)}
		if strings.HasSuffix(k, "/") {
			opts = append(opts, clientv3.WithPrefix())
		}
		wch := f.Client.Watch(wctx, f.Prefix+k, opts...)
		go func() {
			for wr := range wch {
				select {
				case merged <- batch{wr: wr}:
				case <-wctx.Done():
					return
				}
			}
			select {
			case merged <- batch{closed: true}:
			case <-wctx.Done():
			}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case b := <-merged:
			if b.closed {
				return errors.New("watch closed")
			}
			if err := b.wr.Err(); err != nil {
				return err
			}
			if why := rebuilt(seen, b.wr.Header); why != "" {
				return fmt.Errorf("%w: %s", errRebuilt, why)
			}
			seen.rev, seen.term = max(seen.rev, b.wr.Header.GetRevision()), max(seen.term, b.wr.Header.GetRaftTerm())
			kvs = kvs[:0]
			for _, ev := range b.wr.Events {
				if rel := strings.TrimPrefix(string(ev.Kv.Key), f.Prefix); f.matches(rel) {
					kvs = append(kvs, KV{Key: rel, Value: ev.Kv.Value, Deleted: ev.Type == clientv3.EventTypeDelete, Lease: ev.Kv.Lease, ModRevision: ev.Kv.ModRevision})
				}
			}
			if len(kvs) > 0 && f.Updated(kvs) {
				f.Changed()
			}
		case <-tick:
			f.Changed()
		case <-checks.C:
			// A linearizable read: its header is at least every revision
			// and term the watch has seen, on whichever member answers. A
			// serializable one gave a lagging member's own, lower
			// revision, and the feed listed a healthy store again.
			cctx, cancel := context.WithTimeout(ctx, recheck)
			r, err := f.Client.Get(cctx, f.Prefix+f.Keys[0], clientv3.WithCountOnly())
			cancel()
			if err != nil {
				continue // an outage: the watch says so, or resumes
			}
			if why := rebuilt(seen, r.Header); why != "" {
				return fmt.Errorf("%w: %s", errRebuilt, why)
			}
		}
	}
}
