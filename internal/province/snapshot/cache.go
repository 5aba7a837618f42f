package snapshot

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/security/signing"
)

// The cache is a gzip'd JSON object. Its mtime is the last time the snapshot
// was confirmed current against the store (touched while following).
type cacheFile struct {
	Version  int             `json:"version"`
	Revision int64           `json:"revision"`
	Digest   string          `json:"digest"`
	Topology json.RawMessage `json:"topology"`
	// The center's signature, verified again when the cache is loaded:
	// whoever can write the file must not be able to redirect. Since
	// version 2, of the pointer (SignedPointer: the fields below and
	// Digest, signing.Pointer); before, of Digest alone.
	Signature     []byte    `json:"signature,omitempty"`
	KeyID         string    `json:"key_id,omitempty"`
	SignedPointer bool      `json:"signed_pointer,omitempty"`
	Province      string    `json:"province,omitempty"`
	Epoch         int64     `json:"epoch,omitempty"`
	Seq           int64     `json:"seq,omitempty"`
	AppliedAt     time.Time `json:"applied_at,omitzero"`
	Size          int64     `json:"size,omitempty"`
	Parts         int       `json:"parts,omitempty"`
}

// cacheVersion is the format written; version 1 (a signature of the digest
// alone, no sequence) is still read.
const cacheVersion = 2

type cached struct {
	version       int
	Revision      int64
	Digest        string
	Signature     []byte
	KeyID         string
	signedPointer bool
	pointer       signing.Pointer // what Signature covers when signedPointer
	confirmedAt   time.Time
	topology      *topology.Topology
}

func writeCache(path, province string, st *store.Stored) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	bw := bufio.NewWriter(tmp)
	zw := gzip.NewWriter(bw)
	err = json.NewEncoder(zw).Encode(cacheFile{Version: cacheVersion, Revision: st.Revision, Digest: st.Digest, Topology: st.JSON, Signature: st.Signature, KeyID: st.KeyID,
		SignedPointer: st.SignedPointer, Province: province, Epoch: st.Epoch, Seq: st.Seq, AppliedAt: st.AppliedAt, Size: int64(st.Size), Parts: st.Chunks})
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// The rename lives in the directory: without syncing it, a crash soon
	// after can bring back the old cache (or none) under the new contents'
	// name, and a city restarted during an etcd outage would serve that.
	return syncDir(filepath.Dir(path))
}

// syncDir makes the entries of dir (a rename into it) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// readCache returns nil, nil when there is no cache file.
func readCache(path string) (*cached, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot cache: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("snapshot cache: %w", err)
	}
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		return nil, fmt.Errorf("snapshot cache %s: %w", path, err)
	}
	var c cacheFile
	if err := json.NewDecoder(io.LimitReader(zr, 1<<30)).Decode(&c); err != nil {
		return nil, fmt.Errorf("snapshot cache %s: %w", path, err)
	}
	if c.Version != cacheVersion && c.Version != 1 {
		return nil, fmt.Errorf("snapshot cache %s: format version %d, this build reads 1 and %d", path, c.Version, cacheVersion)
	}
	if sum := sha256.Sum256(c.Topology); hex.EncodeToString(sum[:]) != c.Digest {
		return nil, fmt.Errorf("snapshot cache %s: digest mismatch, file is corrupt", path)
	}
	t, err := topology.DecodeJSON(c.Topology)
	if err != nil {
		return nil, fmt.Errorf("snapshot cache %s: %w", path, err)
	}
	return &cached{version: c.Version, Revision: c.Revision, Digest: c.Digest, Signature: c.Signature, KeyID: c.KeyID, signedPointer: c.SignedPointer,
		pointer:     signing.Pointer{Province: c.Province, Epoch: c.Epoch, Seq: c.Seq, AppliedAt: c.AppliedAt, Digest: c.Digest, Size: c.Size, Parts: c.Parts},
		confirmedAt: info.ModTime(), topology: t}, nil
}

func touch(path string, t time.Time) error { return os.Chtimes(path, t, t) }
