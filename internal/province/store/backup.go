package store

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/topology"
)

// CheckTopology checks the topology keys of a backup (keys relative to
// the province's prefix, values as stored) before anything is written:
// every document kept is whole (its parts, its digest), each history entry
// reads and sits under its own sequence, and the current pointer names a
// kept document that decodes. It returns that document with its epoch,
// sequence and digest (nil when the backup holds no topology) and the
// document as the operator wrote it, when kept. The caller compiles it.
func CheckTopology(keys map[string][]byte) (*Stored, []byte, error) {
	docs := map[string][]part{}
	for k, v := range keys {
		switch {
		case strings.HasPrefix(k, keyspace.PrefixTopologyBlobs):
			d, n, ok := strings.Cut(strings.TrimPrefix(k, keyspace.PrefixTopologyBlobs), "/")
			i, err := strconv.Atoi(n)
			if !ok || err != nil || i < 0 || len(d) != 64 {
				return nil, nil, fmt.Errorf("%s: not a document part (topology/blobs/<sha256>/<n>)", k)
			}
			docs[d] = append(docs[d], part{i, v})
		case strings.HasPrefix(k, keyspace.PrefixTopologyHistory):
			var e historyEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return nil, nil, fmt.Errorf("%s: history entry does not read: %w", k, err)
			}
			if k != keyspace.TopologyHistory(e.Seq) {
				return nil, nil, fmt.Errorf("%s: history entry of sequence %d under another key", k, e.Seq)
			}
		}
	}
	whole := map[string][]byte{}
	for d, parts := range docs {
		slices.SortFunc(parts, func(a, b part) int { return cmp.Compare(a.n, b.n) })
		var blob []byte
		for i, p := range parts {
			if p.n != i {
				return nil, nil, fmt.Errorf("document %.12s: part %d missing (%d parts)", d, i, len(parts))
			}
			blob = append(blob, p.v...)
		}
		data, err := gunzip(blob)
		if err != nil {
			return nil, nil, fmt.Errorf("document %.12s: %w", d, err)
		}
		if SourceDigest(data) != d {
			return nil, nil, fmt.Errorf("document %.12s: its parts do not make the document of that digest", d)
		}
		whole[d] = data
	}
	cur, ok := keys[keyspace.KeyTopologyCurrent]
	if !ok {
		if len(docs) > 0 {
			return nil, nil, fmt.Errorf("%s: missing, but documents are kept", keyspace.KeyTopologyCurrent)
		}
		return nil, nil, nil
	}
	var p pointer
	if err := json.Unmarshal(cur, &p); err != nil {
		return nil, nil, fmt.Errorf("%s: does not read: %w", keyspace.KeyTopologyCurrent, err)
	}
	data, ok := whole[p.Digest]
	if !ok || len(docs[p.Digest]) != p.Chunks || len(data) != p.Size {
		return nil, nil, fmt.Errorf("%s: document %.12s (%d parts, %d bytes) is not in the backup whole", keyspace.KeyTopologyCurrent, p.Digest, p.Chunks, p.Size)
	}
	t, err := topology.DecodeJSON(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: document %.12s: %w", keyspace.KeyTopologyCurrent, p.Digest, err)
	}
	st := &Stored{Digest: p.Digest, AppliedAt: p.AppliedAt, JSON: data, Topology: t, Epoch: p.Epoch, Seq: p.Seq, Size: p.Size, Chunks: p.Chunks, KeyID: p.KeyID}
	return st, whole[p.Source], nil
}

type part struct {
	n int
	v []byte
}
