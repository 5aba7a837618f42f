package snapshot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/testbed/fixture"
)

// TestWriteCacheRenamesAndSyncs: the cache is written whole (temp file,
// fsync, rename, directory fsync) and reads back; no temp file is left.
func TestWriteCacheRenamesAndSyncs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(dir, "snapshot.cache")
	js, digest, err := store.Canonical(fixture.Weighted(t, 100))
	if err != nil {
		t.Fatal(err)
	}
	for rev := int64(7); rev <= 8; rev++ { // the second write replaces the first
		if err := writeCache(path, "", &store.Stored{Revision: rev, Digest: digest, JSON: js}); err != nil {
			t.Fatal(err)
		}
		c, err := readCache(path)
		if err != nil || c == nil || c.Revision != rev {
			t.Fatalf("read back: %+v, %v", c, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("directory holds %v (%v), want only the cache", entries, err)
	}
}

// TestSyncDirErrors: a directory that cannot be synced is an error naming it.
func TestSyncDirErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone")
	err := syncDir(missing)
	if err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("syncDir(%s) = %v", missing, err)
	}
	if err := syncDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	// A cache under a path whose parent is a file cannot be written at all.
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeCache(filepath.Join(file, "snapshot.cache"), "", &store.Stored{Revision: 1}); err == nil {
		t.Fatal("writeCache under a regular file succeeded")
	}
}
