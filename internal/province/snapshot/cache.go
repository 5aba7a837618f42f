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
)

// The cache is a gzip'd JSON object. Its mtime is the last time the snapshot
// was confirmed current against the store (touched while following).
type cacheFile struct {
	Version  int             `json:"version"`
	Revision int64           `json:"revision"`
	Digest   string          `json:"digest"`
	Topology json.RawMessage `json:"topology"`
	// The center's signature of Digest, verified again when the cache is
	// loaded: whoever can write the file must not be able to redirect.
	Signature []byte `json:"signature,omitempty"`
	KeyID     string `json:"key_id,omitempty"`
}

const cacheVersion = 1

type cached struct {
	Revision    int64
	Digest      string
	Signature   []byte
	KeyID       string
	confirmedAt time.Time
	topology    *topology.Topology
}

func writeCache(path string, st *store.Stored) error {
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
	err = json.NewEncoder(zw).Encode(cacheFile{Version: cacheVersion, Revision: st.Revision, Digest: st.Digest, Topology: st.JSON, Signature: st.Signature, KeyID: st.KeyID})
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
	if c.Version != cacheVersion {
		return nil, fmt.Errorf("snapshot cache %s: format version %d, this build reads %d", path, c.Version, cacheVersion)
	}
	if sum := sha256.Sum256(c.Topology); hex.EncodeToString(sum[:]) != c.Digest {
		return nil, fmt.Errorf("snapshot cache %s: digest mismatch, file is corrupt", path)
	}
	t, err := topology.DecodeJSON(c.Topology)
	if err != nil {
		return nil, fmt.Errorf("snapshot cache %s: %w", path, err)
	}
	return &cached{Revision: c.Revision, Digest: c.Digest, Signature: c.Signature, KeyID: c.KeyID, confirmedAt: info.ModTime(), topology: t}, nil
}

func touch(path string, t time.Time) error { return os.Chtimes(path, t, t) }
