// Package store keeps the province in etcd: the topology (applied atomically
// and revisioned), and the registry of running scheduler instances.
//
// Layout under the configured prefix (default /anysched/):
//
//	topology/current             pointer: digest, chunk count, size, time, signature
//	topology/blobs/<digest>/<n>  the gzip'd JSON document in <=512 KiB chunks;
//	                             also the document as the operator wrote it
//	                             (comments and all), under its own digest
//	topology/history/<seq>       one entry per apply or rollback (history.go)
//	instances/<id>               one running scheduler, under a lease
//
// A province of 100,000 zone networks is larger than etcd's default request
// limit (1.5 MiB), so a document cannot go in one transaction. It is written
// as content-addressed chunks first; then one transaction flips the pointer,
// guarded by the pointer's mod revision. Readers fetch the chunks at the
// pointer's revision, so nobody ever sees half a topology. The pointer's mod
// revision is the topology revision shown to operators. The same transaction
// records the apply in the history, and the pointer carries the center's
// signature of the digest (internal/security/signing) for readers to verify.
//
// The canonical JSON is what is signed, compiled and compared; the document
// as written is kept beside it only for people (`schedctl get topology`
// returns it, rollback re-applies it), so that comments survive a round trip.
package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/security/signing"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultChunkSize bounds one etcd value of a stored document, well below
// etcd's default 1.5 MiB request limit.
const DefaultChunkSize = 512 << 10

// maxDocumentBytes bounds a stored document after decompression.
const maxDocumentBytes = 512 << 20

// maxPointerBytes bounds the topology pointer's value: a reader decodes it
// before it can verify anything.
const maxPointerBytes = 64 << 10

// ErrCorrupt marks a stored topology that is there but wrong: a pointer
// that cannot be read or is out of range, parts missing or extra, a size or
// digest that does not match, a document that does not decode. A reader
// refuses that revision (and keeps what it has) rather than retrying it.
var ErrCorrupt = errors.New("corrupt")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%s (%w)", fmt.Sprintf(format, args...), ErrCorrupt)
}

// Store is the project's view of etcd.
type Store struct {
	// ChunkSize is the largest value written for a document chunk.
	ChunkSize int
	// StatePartBytes bounds a plan state's base part (0: 1 MiB, the
	// default); tests make it small to have many parts of few sessions.
	StatePartBytes int

	cli    *clientv3.Client
	prefix string
	log    *slog.Logger

	// states: what was last published of each plan state this store
	// writes (region/instance), for the next publication's delta.
	statesMu sync.Mutex
	states   map[string]*lockedWriter
}

// New wraps a connected client. prefix must end with '/'.
func New(cli *clientv3.Client, prefix string, log *slog.Logger) *Store {
	return &Store{ChunkSize: DefaultChunkSize, cli: cli, prefix: prefix, log: log.With("component", "store")}
}

// Prefix is the key prefix of this province.
func (s *Store) Prefix() string { return s.prefix }

// Client returns the underlying etcd client.
func (s *Store) Client() *clientv3.Client { return s.cli }

// CurrentKey is the key schedulers watch.
func (s *Store) CurrentKey() string { return s.prefix + keyspace.KeyTopologyCurrent }

func (s *Store) blobPrefix(digest string) string {
	return s.prefix + keyspace.TopologyBlobs(digest)
}

// pointer is the value of topology/current (and part of each history entry).
type pointer struct {
	Digest    string    `json:"digest"`
	Chunks    int       `json:"chunks"`
	Size      int       `json:"size"` // uncompressed JSON bytes
	AppliedAt time.Time `json:"applied_at"`
	// Seq numbers applies: the history key of this one.
	Seq int64 `json:"seq,omitempty"`
	// Epoch is the store's founding (unix nanoseconds; 0: founded before
	// epochs): set by the first apply into a store without a pointer and
	// by a restore, carried by every apply after. Readers order pointers
	// by epoch, then sequence, so a store rebuilt from nothing, whose
	// sequence starts again at 1, is served, and no pointer of the store
	// it replaces can be put back.
	Epoch int64 `json:"epoch,omitempty"`
	// Signatures by the key KeyID (internal/security/signing), empty when
	// the center has no signing key: PointerSignature of the pointer's
	// signed fields (signing.Pointer), which readers of this release
	// verify; Signature of the digest alone, which readers of the release
	// before verify (kept for one release, so that the center may be
	// upgraded first).
	Signature        []byte `json:"signature,omitempty"`
	PointerSignature []byte `json:"pointer_signature,omitempty"`
	KeyID            string `json:"key_id,omitempty"`
	// Source is the digest of the document as the operator wrote it, kept
	// in SourceChunks chunks like the canonical one; empty: not kept (an
	// apply from before this existed, or the canonical JSON itself).
	Source       string `json:"source,omitempty"`
	SourceChunks int    `json:"source_chunks,omitempty"`
}

// signature is the signature a reader of this release verifies: of the
// pointer when there is one, else (a center from before) of the digest.
func (p *pointer) signature() (sig []byte, ofPointer bool) {
	if len(p.PointerSignature) > 0 {
		return p.PointerSignature, true
	}
	return p.Signature, false
}

// signed is what p's pointer signature covers in the province of prefix.
func (p *pointer) signed(prefix string) signing.Pointer {
	return signing.Pointer{Province: prefix, Epoch: p.Epoch, Seq: p.Seq, AppliedAt: p.AppliedAt, Digest: p.Digest, Size: int64(p.Size), Parts: p.Chunks}
}

// Pointer is the topology pointer as a reader finds it (CurrentPointer):
// what it verifies before it reads the document (Load).
type Pointer struct {
	Revision int64 // the topology revision (the pointer's etcd ModRevision)
	Epoch    int64 // the store's founding (pointer.Epoch)
	Seq      int64 // the apply's sequence number
	Digest   string
	// Signed is what the signature covers (signing.Pointer), when
	// SignedPointer; otherwise the signature, if any, is of the digest
	// alone (a center from before pointers were signed).
	Signed        signing.Pointer
	SignedPointer bool
	Signature     []byte
	KeyID         string

	p  pointer
	at int64 // the etcd revision it was read at
}

// Stored is the topology as the store holds it.
type Stored struct {
	Revision  int64
	Digest    string
	AppliedAt time.Time
	JSON      []byte // canonical JSON of the document (Revision field zero)
	Topology  *topology.Topology
	// Epoch, Seq, Size and Chunks are the pointer's: with AppliedAt,
	// Digest and the province, what its signature covers when
	// SignedPointer.
	Epoch         int64
	Seq           int64
	Size, Chunks  int
	SignedPointer bool
	// Signature and KeyID as the center signed the pointer (or, before
	// that, Digest); empty if unsigned.
	Signature []byte
	KeyID     string
	// SourceDigest is the digest of the document as written (Source reads
	// it); empty when none is kept.
	SourceDigest string

	sourceChunks int
	at           int64 // etcd revision the document was read at; 0: latest
}

// Signed is what st's pointer signature covers in the province of
// prefix (when SignedPointer).
func (st *Stored) Signed(prefix string) signing.Pointer {
	return signing.Pointer{Province: prefix, Epoch: st.Epoch, Seq: st.Seq, AppliedAt: st.AppliedAt, Digest: st.Digest, Size: int64(st.Size), Parts: st.Chunks}
}

// ErrNoTopology means nothing has been applied yet.
var ErrNoTopology = errors.New("no topology has been applied yet")

// StaleError refuses an apply based on a revision that is no longer current.
type StaleError struct{ Base, Current int64 }

func (e *StaleError) Error() string {
	return fmt.Sprintf("the document is based on revision %d but the store is at revision %d: fetch the current topology (schedctl get topology) and apply again, or use --force", e.Base, e.Current)
}

// ErrConflict means another apply won a race; nothing was changed.
var ErrConflict = errors.New("the topology changed while this apply was in progress; nothing was applied, try again")

// ApplyOptions control Apply.
type ApplyOptions struct {
	// BaseRevision, when non-zero, must equal the current revision unless Force.
	BaseRevision int64
	Force        bool
	// Expect, when set, is the revision the caller judged the change
	// against (its diff, its guard): if another apply came first, Apply
	// returns ErrConflict, whatever Force.
	Expect *int64
	// Signer signs the document's digest; nil stores it unsigned.
	Signer *signing.Signer
	// Identity, Note and Change go into the history entry: who applied,
	// how ("apply", "rollback to 42") and the diff's one-line summary.
	Identity, Note, Change string
	// Keep is how many revisions' documents stay in etcd; below 2 (or 0):
	// DefaultHistoryKeep.
	Keep int
	// NewEpoch founds a new epoch (a restore): the pointer is numbered
	// after every one the store held before, whatever its sequence.
	NewEpoch bool
	// EpochAfter, with a new epoch, is an epoch the new one must follow
	// besides the store's own (a restore: the backup's, so that a center
	// whose clock is behind the lost store's founding still founds a later
	// one, not one every reader refuses as a replay).
	EpochAfter int64
	// Source is the document as the operator wrote it (the bytes of t),
	// kept beside the canonical form for `get topology` and rollback; nil
	// keeps none.
	Source []byte
}

// ApplyResult says what Apply did.
type ApplyResult struct {
	Revision   int64
	Digest     string
	Changed    bool  // false when the document equals the stored one
	Epoch, Seq int64 // of the pointer written (or kept)
}

// SourceDigest is the digest of a document as written.
func SourceDigest(src []byte) string {
	sum := sha256.Sum256(src)
	return hex.EncodeToString(sum[:])
}

// Canonical returns the stored form of a document and its digest.
func Canonical(t *topology.Topology) ([]byte, string, error) {
	c := *t
	c.Revision = 0 // where a document came from is not part of its content
	data, err := c.EncodeJSON()
	if err != nil {
		return nil, "", fmt.Errorf("store: encode topology: %w", err)
	}
	sum := sha256.Sum256(data)
	return data, hex.EncodeToString(sum[:]), nil
}

// Apply stores a validated document atomically. The caller validates
// (topology.Compile): the store only keeps what it is given.
func (s *Store) Apply(ctx context.Context, t *topology.Topology, opts ApplyOptions) (ApplyResult, error) {
	data, digest, err := Canonical(t)
	if err != nil {
		return ApplyResult{}, err
	}
	cur, err := s.cli.Get(ctx, s.CurrentKey())
	if err != nil {
		return ApplyResult{}, fmt.Errorf("store: read current topology: %w", err)
	}
	var curRev int64
	var curPtr pointer
	found := opts.NewEpoch || len(cur.Kvs) == 0
	if len(cur.Kvs) > 0 {
		curRev = cur.Kvs[0].ModRevision
		if err := json.Unmarshal(cur.Kvs[0].Value, &curPtr); err != nil {
			// Its sequence is lost with it, and readers refuse a sequence
			// at or below the last they verified: go on only on purpose,
			// numbering after the history's last apply.
			if !opts.Force {
				return ApplyResult{}, fmt.Errorf("store: the current topology pointer (revision %d) is unreadable: %w; delete topology/current (etcdctl, as root) and apply again: the numbering goes on from the history", curRev, err)
			}
			s.log.Warn("current topology pointer is unreadable; overwriting it (force)", "revision", curRev, "err", err)
			curPtr, found = pointer{Seq: s.lastSeq(ctx)}, true
		}
	}
	if opts.Expect != nil && *opts.Expect != curRev {
		return ApplyResult{}, ErrConflict
	}
	if opts.BaseRevision != 0 && !opts.Force && opts.BaseRevision != curRev {
		return ApplyResult{}, &StaleError{Base: opts.BaseRevision, Current: curRev}
	}
	// The same document is no change, unless it is to be signed by another
	// key or in another format than it is (a signing key rotation, or a
	// center upgraded from digest signatures, re-signs the current one).
	if !found && curPtr.Digest == digest && (opts.Signer == nil || curPtr.KeyID == opts.Signer.KeyID() && len(curPtr.PointerSignature) > 0) {
		return ApplyResult{Revision: curRev, Digest: digest, Changed: false, Epoch: curPtr.Epoch, Seq: curPtr.Seq}, nil
	}

	chunks, err := s.writeBlob(ctx, digest, data)
	if err != nil {
		return ApplyResult{}, err
	}
	// After the pointer's and the history's last: a pointer put back or
	// deleted by someone without the key must not number this apply at or
	// below what the readers verified.
	p := pointer{Digest: digest, Chunks: chunks, Size: len(data), AppliedAt: time.Now().UTC(), Seq: max(curPtr.Seq, s.lastSeq(ctx)) + 1, Epoch: curPtr.Epoch}
	if found {
		// A store without a pointer (new, rebuilt from nothing, or its
		// pointer deleted or unreadable), or a restore: a new epoch, after
		// the one it replaces here; readers order by it before the
		// sequence (signing.Pointer.Before).
		p.Epoch = max(p.AppliedAt.UnixNano(), curPtr.Epoch+1, opts.EpochAfter+1)
	}
	if opts.Source != nil {
		if sd := SourceDigest(opts.Source); sd != digest {
			if p.SourceChunks, err = s.writeBlob(ctx, sd, opts.Source); err != nil {
				return ApplyResult{}, fmt.Errorf("%w (the document as written)", err)
			}
			p.Source = sd
		}
	}
	if opts.Signer != nil {
		p.PointerSignature, p.Signature, p.KeyID = opts.Signer.SignPointer(p.signed(s.prefix)), opts.Signer.Sign(digest), opts.Signer.KeyID()
	}
	ptr, _ := json.Marshal(p)
	entry, _ := json.Marshal(historyEntry{pointer: p, Identity: opts.Identity, Note: opts.Note, Change: opts.Change, Counts: t.Counts()})
	cmp := clientv3.Compare(clientv3.ModRevision(s.CurrentKey()), "=", curRev)
	resp, err := s.cli.Txn(ctx).If(cmp).Then(
		clientv3.OpPut(s.CurrentKey(), string(ptr)),
		clientv3.OpPut(s.historyKey(p.Seq), string(entry)),
	).Commit()
	if err != nil {
		return ApplyResult{}, fmt.Errorf("store: switch to the new topology: %w", err)
	}
	if !resp.Succeeded {
		return ApplyResult{}, ErrConflict
	}
	rev := resp.Header.Revision
	s.log.Info("topology applied", "revision", rev, "previous", curRev, "digest", digest[:12], "bytes", len(data), "chunks", chunks, "signed_by", p.KeyID)
	s.collect(ctx, opts.Keep, digest, curPtr.Digest, p.Source, curPtr.Source)
	return ApplyResult{Revision: rev, Digest: digest, Changed: true, Epoch: p.Epoch, Seq: p.Seq}, nil
}

// writeBlob writes data gzip'd in chunks under digest and returns how many.
func (s *Store) writeBlob(ctx context.Context, digest string, data []byte) (int, error) {
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	if _, err := zw.Write(data); err != nil {
		return 0, fmt.Errorf("store: compress topology: %w", err)
	}
	if err := zw.Close(); err != nil {
		return 0, fmt.Errorf("store: compress topology: %w", err)
	}
	blob := gz.Bytes()
	size := s.ChunkSize
	chunks := (len(blob) + size - 1) / size
	for i := range chunks {
		part := blob[i*size : min(len(blob), (i+1)*size)]
		if _, err := s.cli.Put(ctx, fmt.Sprintf("%s%06d", s.blobPrefix(digest), i), string(part)); err != nil {
			return 0, fmt.Errorf("store: write topology chunk %d/%d: %w", i+1, chunks, err)
		}
	}
	return chunks, nil
}

// Source returns the document of st as the operator wrote it; nil when
// none is kept (or it is gone: a revision past the history's keep).
func (s *Store) Source(ctx context.Context, st *Stored) ([]byte, error) {
	if st.SourceDigest == "" {
		return nil, nil
	}
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
	if st.at != 0 {
		opts = append(opts, clientv3.WithRev(st.at))
	}
	chunks, err := s.cli.Get(ctx, s.blobPrefix(st.SourceDigest), opts...)
	if err != nil {
		return nil, fmt.Errorf("store: read the document as written of revision %d: %w", st.Revision, err)
	}
	if len(chunks.Kvs) != st.sourceChunks {
		return nil, nil
	}
	var blob bytes.Buffer
	for _, c := range chunks.Kvs {
		blob.Write(c.Value)
	}
	data, err := gunzip(blob.Bytes())
	if err != nil {
		return nil, fmt.Errorf("store: the document as written of revision %d: %w", st.Revision, err)
	}
	if got := SourceDigest(data); got != st.SourceDigest {
		return nil, fmt.Errorf("store: the document as written of revision %d: digest mismatch (stored %s, computed %s)", st.Revision, st.SourceDigest, got)
	}
	return data, nil
}

// collect deletes chunk sets other than those of the last keep history
// entries, the current and the previous one, and trims the history.
// Readers fetch at the revision they read the pointer at, so a reader in
// flight still finds deleted chunks until etcd compacts.
func (s *Store) collect(ctx context.Context, keepN int, keep ...string) {
	kept, err := s.trimHistory(ctx, keepN)
	if err != nil {
		s.log.Warn("reading the topology history failed; old documents stay until the next apply", "err", err)
		return
	}
	keep = append(keep, kept...)
	root := s.prefix + keyspace.PrefixTopologyBlobs
	resp, err := s.cli.Get(ctx, root, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		s.log.Warn("listing old topology chunks failed; they stay until the next apply", "err", err)
		return
	}
	stale := map[string]bool{}
	for _, kv := range resp.Kvs {
		d, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), root), "/")
		keepIt := false
		for _, k := range keep {
			keepIt = keepIt || (d == k && k != "")
		}
		if !keepIt {
			stale[d] = true
		}
	}
	for d := range stale {
		if _, err := s.cli.Delete(ctx, s.blobPrefix(d), clientv3.WithPrefix()); err != nil {
			s.log.Warn("deleting old topology chunks failed", "digest", d, "err", err)
		}
	}
}

// CurrentRevision returns the revision of the stored topology (0 if none),
// with a linearizable read: it fails when this member is cut off from quorum.
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	resp, err := s.cli.Get(ctx, s.CurrentKey(), clientv3.WithKeysOnly())
	if err != nil {
		return 0, fmt.Errorf("store: read topology revision: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return resp.Kvs[0].ModRevision, nil
}

// Current loads the stored topology whole.
func (s *Store) Current(ctx context.Context) (*Stored, error) {
	for attempt := 0; ; attempt++ {
		st, err := s.current(ctx)
		// A compaction between reading the pointer and its chunks: read
		// both again.
		if errors.Is(err, rpctypes.ErrCompacted) && attempt < 3 {
			continue
		}
		return st, err
	}
}

func (s *Store) current(ctx context.Context) (*Stored, error) {
	p, err := s.CurrentPointer(ctx)
	if err != nil {
		return nil, err
	}
	return s.Load(ctx, p)
}

// CurrentPointer reads the topology pointer alone (ErrNoTopology when
// none), for a reader that verifies it before reading the document.
func (s *Store) CurrentPointer(ctx context.Context) (*Pointer, error) {
	resp, err := s.cli.Get(ctx, s.CurrentKey())
	if err != nil {
		return nil, fmt.Errorf("store: read topology pointer: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, ErrNoTopology
	}
	kv := resp.Kvs[0]
	if len(kv.Value) > maxPointerBytes {
		return nil, corrupt("store: topology pointer at revision %d: %d bytes, more than a pointer's %d", kv.ModRevision, len(kv.Value), maxPointerBytes)
	}
	var p pointer
	if err := json.Unmarshal(kv.Value, &p); err != nil {
		return nil, corrupt("store: topology pointer at revision %d: %v", kv.ModRevision, err)
	}
	if p.Chunks < 0 || p.Size < 0 || p.Size > maxDocumentBytes {
		return nil, corrupt("store: topology pointer at revision %d: %d parts of %d bytes in all, out of range (at most %d bytes)", kv.ModRevision, p.Chunks, p.Size, maxDocumentBytes)
	}
	// The chunks are to be read as of the read that found this pointer,
	// not as of the pointer's own revision: that one is compacted away once
	// the history is shorter than the time since the apply (etcdhousekeep
	// keeps minutes), and the pointer was p at the read's revision all the
	// same.
	sig, signed := p.signature()
	return &Pointer{Revision: kv.ModRevision, Epoch: p.Epoch, Seq: p.Seq, Digest: p.Digest, Signed: p.signed(s.prefix), SignedPointer: signed,
		Signature: sig, KeyID: p.KeyID, p: p, at: resp.Header.Revision}, nil
}

// Load reads the document p points at: no more parts than it states, and
// decompressed no further than its stated size.
func (s *Store) Load(ctx context.Context, p *Pointer) (*Stored, error) {
	return s.load(ctx, p.p, p.Revision, p.at)
}

// lastSeq is the sequence of the history's last apply (0: none or
// unreadable).
func (s *Store) lastSeq(ctx context.Context) int64 {
	resp, err := s.cli.Get(ctx, s.historyPrefix(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(1), clientv3.WithKeysOnly())
	if err != nil || len(resp.Kvs) == 0 {
		return 0
	}
	seq, err := strconv.ParseInt(strings.TrimPrefix(string(resp.Kvs[0].Key), s.historyPrefix()), 10, 64)
	if err != nil {
		return 0
	}
	return seq
}

// load reads the document p points at, as of etcd revision at (0: the
// latest), for topology revision rev.
func (s *Store) load(ctx context.Context, p pointer, rev, at int64) (*Stored, error) {
	// No more parts than the pointer states (one more tells that there
	// are), and no further than its size once decompressed.
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend), clientv3.WithLimit(int64(p.Chunks) + 1)}
	if at != 0 {
		opts = append(opts, clientv3.WithRev(at))
	}
	chunks, err := s.cli.Get(ctx, s.blobPrefix(p.Digest), opts...)
	if err != nil {
		return nil, fmt.Errorf("store: read topology chunks at revision %d: %w", rev, err)
	}
	if n := len(chunks.Kvs); n != p.Chunks || chunks.More {
		if chunks.More {
			n = int(chunks.Count)
		}
		return nil, corrupt("store: topology at revision %d: %d chunks present, its pointer states %d", rev, n, p.Chunks)
	}
	var blob bytes.Buffer
	for _, c := range chunks.Kvs {
		blob.Write(c.Value)
	}
	data, err := gunzipSized(blob.Bytes(), p.Size)
	if err != nil {
		return nil, corrupt("store: topology at revision %d: %v", rev, err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != p.Digest {
		return nil, corrupt("store: topology at revision %d: digest mismatch (stored %s, computed %s)", rev, p.Digest, got)
	}
	t, err := topology.DecodeJSON(data)
	if err != nil {
		hint := ""
		if strings.Contains(err.Error(), "unknown field") {
			// Refused whole, never applied in part.
			hint = " (a field of a newer release? this build does not know it: upgrade this daemon, or apply without the field until every daemon knows it)"
		}
		return nil, corrupt("store: topology at revision %d: %v%s", rev, err, hint)
	}
	sig, signed := p.signature()
	return &Stored{Revision: rev, Digest: p.Digest, AppliedAt: p.AppliedAt, JSON: data, Topology: t, Epoch: p.Epoch, Seq: p.Seq, Size: p.Size, Chunks: p.Chunks,
		SignedPointer: signed, Signature: sig, KeyID: p.KeyID, SourceDigest: p.Source, sourceChunks: p.SourceChunks, at: at}, nil
}

// gunzipSized decompresses a document that its pointer says is size bytes:
// no further than that (and one byte more, which tells it is not).
func gunzipSized(b []byte, size int) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	// Grown as it comes: the size is the pointer's word, checked only
	// once its signature is (or not at all, unsigned).
	var out bytes.Buffer
	if _, err := io.Copy(&out, io.LimitReader(zr, int64(min(size, maxDocumentBytes))+1)); err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	data := out.Bytes()
	if len(data) != size {
		if len(data) > size {
			return nil, fmt.Errorf("the document decompresses to more than the %d bytes its pointer states", size)
		}
		return nil, fmt.Errorf("the document decompresses to %d bytes, its pointer states %d", len(data), size)
	}
	return data, nil
}

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(zr, maxDocumentBytes+1))
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	if len(data) > maxDocumentBytes {
		return nil, fmt.Errorf("document larger than %d bytes", maxDocumentBytes)
	}
	return data, nil
}

// WatchCurrent returns a watch on the topology pointer.
func (s *Store) WatchCurrent(ctx context.Context) clientv3.WatchChan {
	return s.cli.Watch(clientv3.WithRequireLeader(ctx), s.CurrentKey())
}
