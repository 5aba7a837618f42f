package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/topology"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultHistoryKeep is how many revisions' documents stay in etcd (for
// diff and rollback) when the center's apply.history_keep is not set.
const DefaultHistoryKeep = 20

// maxHistoryEntries bounds the history itself: an entry is a few hundred
// bytes, so it outlives its document (listed as not kept) up to this many
// applies, then it is deleted.
const maxHistoryEntries = 1000

// historyEntry is the value of topology/history/<seq>, written in the
// transaction that makes its document current: that transaction's revision
// (the key's mod revision) is the topology revision.
type historyEntry struct {
	pointer
	Identity string          `json:"identity,omitempty"`
	Note     string          `json:"note,omitempty"`
	Change   string          `json:"change,omitempty"`
	Counts   topology.Counts `json:"counts"`
}

// HistoryEntry is one apply or rollback.
type HistoryEntry struct {
	Revision  int64
	Digest    string
	AppliedAt time.Time
	// Identity is who applied (certificate identity); Note how ("apply",
	// "rollback to 42"); Change the diff's one-line summary.
	Identity, Note, Change string
	Counts                 topology.Counts
	// Kept: the document is still in etcd (diff and rollback possible).
	Kept bool
}

// ErrNotKept means a topology revision's document is no longer in etcd.
var ErrNotKept = errors.New("that revision's document is not kept (see schedctl history)")

// ErrNoRevision means no topology was applied at that etcd revision: the
// revision numbers are etcd's, shared with every other write, so most
// numbers are not topology revisions at all.
var ErrNoRevision = errors.New("no topology was applied at that revision")

func (s *Store) historyPrefix() string { return s.prefix + keyspace.PrefixTopologyHistory }

func (s *Store) historyKey(seq int64) string { return s.prefix + keyspace.TopologyHistory(seq) }

// History lists applies newest first, at most limit (0: all there are).
func (s *Store) History(ctx context.Context, limit int) ([]HistoryEntry, error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend)}
	if limit > 0 {
		opts = append(opts, clientv3.WithLimit(int64(limit)))
	}
	resp, err := s.cli.Get(ctx, s.historyPrefix(), opts...)
	if err != nil {
		return nil, fmt.Errorf("store: read topology history: %w", err)
	}
	blobs, err := s.cli.Get(ctx, s.prefix+keyspace.PrefixTopologyBlobs, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("store: list topology documents: %w", err)
	}
	chunks := map[string]int{}
	root := s.prefix + keyspace.PrefixTopologyBlobs
	for _, kv := range blobs.Kvs {
		d, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), root), "/")
		chunks[d]++
	}
	out := make([]HistoryEntry, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var e historyEntry
		if err := json.Unmarshal(kv.Value, &e); err != nil {
			s.log.Warn("unreadable topology history entry; skipped", "key", string(kv.Key), "err", err)
			continue
		}
		out = append(out, HistoryEntry{
			Revision: kv.ModRevision, Digest: e.Digest, AppliedAt: e.AppliedAt,
			Identity: e.Identity, Note: e.Note, Change: e.Change, Counts: e.Counts,
			Kept: e.Chunks > 0 && chunks[e.Digest] == e.Chunks,
		})
	}
	return out, nil
}

// Revision loads the document of a topology revision, as long as it is
// kept (ErrNotKept otherwise).
func (s *Store) Revision(ctx context.Context, rev int64) (*Stored, error) {
	resp, err := s.cli.Get(ctx, s.historyPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("store: read topology history: %w", err)
	}
	for _, kv := range resp.Kvs {
		if kv.ModRevision != rev {
			continue
		}
		var e historyEntry
		if err := json.Unmarshal(kv.Value, &e); err != nil {
			return nil, fmt.Errorf("store: topology history entry of revision %d: %w", rev, err)
		}
		n, err := s.cli.Get(ctx, s.blobPrefix(e.Digest), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return nil, fmt.Errorf("store: read topology chunks of revision %d: %w", rev, err)
		}
		if e.Chunks == 0 || n.Count != int64(e.Chunks) {
			return nil, fmt.Errorf("store: revision %d: %w", rev, ErrNotKept)
		}
		return s.load(ctx, e.pointer, rev, 0)
	}
	// Applied before the history existed, but current: still readable.
	if cur, err := s.Current(ctx); err == nil && cur.Revision == rev {
		return cur, nil
	}
	kept := "none"
	if h, err := s.History(ctx, 0); err == nil {
		var revs []string
		for _, e := range h {
			if e.Kept {
				revs = append(revs, strconv.FormatInt(e.Revision, 10))
			}
		}
		if len(revs) > 0 {
			kept = strings.Join(revs, ", ")
		}
	}
	return nil, fmt.Errorf("store: revision %d: %w; the kept revisions, newest first: %s", rev, ErrNoRevision, kept)
}

// trimHistory deletes history entries beyond maxHistoryEntries (and keep)
// and returns the digests of the newest keep entries, whose documents stay.
func (s *Store) trimHistory(ctx context.Context, keep int) ([]string, error) {
	if keep < 2 {
		keep = DefaultHistoryKeep
	}
	resp, err := s.cli.Get(ctx, s.historyPrefix(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
	if err != nil {
		return nil, err
	}
	var digests []string
	for i, kv := range resp.Kvs {
		if i >= keep {
			break
		}
		var e historyEntry
		if json.Unmarshal(kv.Value, &e) == nil {
			digests = append(digests, e.Digest, e.Source)
		}
	}
	if n := max(maxHistoryEntries, keep); len(resp.Kvs) > n {
		// Keys sort oldest first: delete every key below the oldest one kept.
		if _, err := s.cli.Delete(ctx, s.historyPrefix(), clientv3.WithRange(string(resp.Kvs[n-1].Key))); err != nil {
			s.log.Warn("trimming the topology history failed", "err", err)
		}
	}
	return digests, nil
}
