package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Claim is the capacity one scheduler instance has taken on one server for
// its QoE allocation: what its plan uses plus its share of the headroom for
// sessions that arrive before the next solve.
type Claim struct {
	BandwidthKbps float64 `json:"bandwidth_kbps"`
	Compute       float64 `json:"compute"`
}

// Claims is what one instance publishes for its region.
type Claims struct {
	// Sessions the instance plans; shares are in proportion to them when
	// an instance is starved.
	Sessions int `json:"sessions"`
	// Starved: the instance sent sessions that a server covers to the
	// fallback for lack of capacity. A peer holding more than its share
	// then gives some back.
	Starved bool `json:"starved,omitempty"`
	// Servers: the claims by server name.
	Servers map[string]Claim `json:"servers"`
	// Rank is the instance's place in its region's route preference (0:
	// the primary, 1: the first standby; a center planning a fallen city
	// ranks after every city scheduler). Without etcd, the one instance
	// ranked before every peer may plan on the region's whole capacity,
	// since routers send the region's STBs to it alone.
	Rank int `json:"rank"`
	// Idle: no STB of the region reached the instance lately; it keeps
	// only a small share for a failover's first STBs.
	Idle bool `json:"idle,omitempty"`
	// Made is when the claims were computed (unix milliseconds): a peer
	// whose claims stay old is frozen or cut off, and hands nothing out.
	Made int64 `json:"made,omitempty"`
	// Format is the claims' format version (ClaimsFormat); absent (0) is
	// 1, the only one so far. A reader refuses claims of a later format
	// (NewerFormatError): it cannot tell what they hold.
	Format int `json:"format,omitempty"`
}

// decodeClaims reads a stored claims value, refusing one of a format
// newer than ClaimsFormat.
func decodeClaims(val []byte) (Claims, error) {
	var c Claims
	if err := json.Unmarshal(val, &c); err != nil {
		return Claims{}, err
	}
	if c.Format > ClaimsFormat {
		return Claims{}, &NewerFormatError{Document: "capacity claims", Format: c.Format, Reads: ClaimsFormat}
	}
	return c, nil
}

// Yielding reports whether claims c, of an instance that takes STBs,
// give way to better's: better ranks before it, takes STBs too and
// claimed within fresh of c. Routers send the region's STBs to the
// better-ranked instance, so c's instance yields at its next solve.
func (c Claims) Yielding(better Claims, fresh time.Duration) bool {
	return !c.Idle && !better.Idle && better.Rank < c.Rank && better.Made >= c.Made-fresh.Milliseconds()
}

// Outdated reports whether claims c, of an instance ranked before taker,
// which takes STBs, are older than fresh at taker's: routers would send
// the STBs to c's instance if it announced, so it is frozen, gone or cut
// off, and hands nothing out; its claims (kept until its lease expires)
// are not in taker's way.
func (c Claims) Outdated(taker Claims, fresh time.Duration) bool {
	return !taker.Idle && c.Rank < taker.Rank && c.Made < taker.Made-fresh.Milliseconds()
}

// ClaimBoard publishes one instance's claims on the servers of its region
// and reads its peers'. Claims live under a lease, so a dead instance's
// capacity returns to the others after TTL. A commit succeeds only if no
// peer's claim changed (or appeared) since the read it was computed from,
// so two instances can never both take the same free capacity.
type ClaimBoard struct {
	Store    *Store
	Region   string
	Instance string
	TTL      time.Duration // of the lease; at least 2 s

	mu    sync.Mutex
	lease clientv3.LeaseID
}

func (b *ClaimBoard) prefix() string {
	return b.Store.prefix + keyspace.AllocClaims(b.Region)
}

// Peers returns every other instance's claims in the region and the store
// revision they were read at.
func (b *ClaimBoard) Peers(ctx context.Context) (map[string]Claims, int64, error) {
	resp, err := b.Store.cli.Get(ctx, b.prefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("store: read claims: %w", err)
	}
	out := make(map[string]Claims, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		id := string(kv.Key[len(b.prefix()):])
		if id == b.Instance {
			continue
		}
		c, err := decodeClaims(kv.Value)
		if err != nil {
			// A claim nobody can read (or of a newer format) still holds
			// capacity: count it as everything, rather than hand its
			// capacity out twice.
			return nil, 0, fmt.Errorf("store: claims of %q at %s: %w", id, kv.Key, err)
		}
		out[id] = c
	}
	return out, resp.Header.Revision, nil
}

// Commit publishes c if no claim under the region changed after rev. It
// returns false (and no error) when a peer got there first: read again.
func (b *ClaimBoard) Commit(ctx context.Context, c Claims, rev int64) (bool, error) {
	val, err := json.Marshal(c)
	if err != nil {
		return false, err
	}
	lease, err := b.keepLease(ctx)
	if err != nil {
		return false, err
	}
	resp, err := b.Store.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(b.prefix()), "<", rev+1).WithPrefix()).
		Then(clientv3.OpPut(b.prefix()+b.Instance, string(val), clientv3.WithLease(lease))).
		Commit()
	if err != nil {
		return false, fmt.Errorf("store: commit claims: %w", err)
	}
	return resp.Succeeded, nil
}

// keepLease refreshes the lease, or grants a new one when there is none or
// etcd no longer knows it.
func (b *ClaimBoard) keepLease(ctx context.Context) (clientv3.LeaseID, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lease != 0 {
		_, err := b.Store.cli.KeepAliveOnce(ctx, b.lease)
		if err == nil {
			return b.lease, nil
		}
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return 0, fmt.Errorf("store: refresh claims lease: %w", err)
		}
		b.lease = 0
	}
	g, err := b.Store.cli.Grant(ctx, max(int64(b.TTL/time.Second), 2))
	if err != nil {
		return 0, fmt.Errorf("store: grant claims lease: %w", err)
	}
	b.lease = g.ID
	return b.lease, nil
}

// Release withdraws the claims (on a clean stop), so peers get the capacity
// at their next solve instead of after the lease's TTL.
func (b *ClaimBoard) Release(ctx context.Context) error {
	b.mu.Lock()
	lease := b.lease
	b.lease = 0
	b.mu.Unlock()
	if lease == 0 {
		return nil
	}
	_, err := b.Store.cli.Revoke(ctx, lease)
	return err
}

// Totals sums every instance's claims in the region (this one's included)
// by server, and counts the records: what the region's capacity guarantee
// is stated on (a server's total never exceeds its capacity).
func (b *ClaimBoard) Totals(ctx context.Context) (records int, total map[string]Claim, err error) {
	resp, err := b.Store.cli.Get(ctx, b.prefix(), clientv3.WithPrefix())
	if err != nil {
		return 0, nil, fmt.Errorf("store: read claims: %w", err)
	}
	total = map[string]Claim{}
	for _, kv := range resp.Kvs {
		c, err := decodeClaims(kv.Value)
		if err != nil {
			return 0, nil, fmt.Errorf("store: claims at %s: %w", kv.Key, err)
		}
		for name, cl := range c.Servers {
			t := total[name]
			total[name] = Claim{BandwidthKbps: t.BandwidthKbps + cl.BandwidthKbps, Compute: t.Compute + cl.Compute}
		}
	}
	return len(resp.Kvs), total, nil
}

// Watch calls fn with every change of a peer's claims in the region (nil
// for a deletion) until ctx ends; the watch is re-established after an
// error, so it returns only ctx's error.
func (b *ClaimBoard) Watch(ctx context.Context, fn func(instance string, c *Claims)) error {
	for ctx.Err() == nil {
		wch := b.Store.cli.Watch(clientv3.WithRequireLeader(ctx), b.prefix(), clientv3.WithPrefix())
		for resp := range wch {
			if resp.Err() != nil {
				break
			}
			for _, ev := range resp.Events {
				id := string(ev.Kv.Key[len(b.prefix()):])
				if id == b.Instance {
					continue
				}
				if ev.Type == clientv3.EventTypeDelete {
					fn(id, nil)
					continue
				}
				if c, err := decodeClaims(ev.Kv.Value); err == nil {
					fn(id, &c)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second): // etcd away: try again
		}
	}
	return ctx.Err()
}
