package accesslog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// paths returns the path of every line in the files, in file order.
func paths(t *testing.T, files ...string) []string {
	t.Helper()
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.Lines(string(b)) {
			i := strings.Index(l, `"path":"`)
			if i < 0 || !strings.HasSuffix(l, "}\n") {
				t.Fatalf("%s: bad line %q", f, l)
			}
			i += len(`"path":"`)
			out = append(out, l[i:i+strings.IndexByte(l[i:], '"')])
		}
	}
	return out
}

// exactlyOnce fails unless got holds /0 .. /n-1 once each.
func exactlyOnce(t *testing.T, got []string, n int) {
	t.Helper()
	seen := make(map[string]bool, len(got))
	for _, p := range got {
		if seen[p] {
			t.Fatalf("%s written twice", p)
		}
		seen[p] = true
	}
	for i := range n {
		if !seen[fmt.Sprint("/", i)] {
			t.Fatalf("/%d lost (%d lines of %d)", i, len(got), n)
		}
	}
	if len(got) != n {
		t.Fatalf("%d lines, want %d", len(got), n)
	}
}

// TestReopen: logrotate renames the file, Reopen starts a new one; the two
// hold every line once, and the new file is created 0640 at most.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	path, rotated := filepath.Join(dir, "access.log"), filepath.Join(dir, "access.log.1")
	r, err := NewFile(prometheus.NewRegistry(), path, Options{FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, r)
	for i := range 10 {
		r.Record(numbered(i, time.Now()))
	}
	eventually(t, "the first lines", func() bool { b, _ := os.ReadFile(path); return strings.Count(string(b), "\n") == 10 })
	if err := os.Rename(path, rotated); err != nil {
		t.Fatal(err)
	}
	r.Record(numbered(10, time.Now())) // may land in either file
	if err := r.Reopen(); err != nil {
		t.Fatal(err)
	}
	for i := 11; i < 20; i++ {
		r.Record(numbered(i, time.Now()))
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, paths(t, rotated, path), 20)
	if got := paths(t, path); len(got) < 9 {
		t.Fatalf("new file holds %v, want the lines after Reopen", got)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm&^0o640 != 0 || perm&0o600 != 0o600 {
		t.Fatalf("mode %v, want 0640 less the umask", perm)
	}
	if err := r.Reopen(); err == nil {
		t.Fatal("Reopen after Run ended: no error")
	}
}

// TestReopenUnderLoad: rotations while callers record lose and repeat
// nothing, and a failed reopen keeps the old file.
func TestReopenUnderLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	const n = 20_000
	r, err := NewFile(prometheus.NewRegistry(), path, Options{Queue: n, FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, r)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < n; i = next.Add(1) - 1 {
				r.Record(numbered(int(i), time.Now()))
				if i%100 == 0 { // pace the callers so that rotations fall among them
					time.Sleep(50 * time.Microsecond)
				}
			}
		})
	}
	files := []string{}
	for k := range 10 {
		rotated := fmt.Sprintf("%s.%d", path, k)
		if err := os.Rename(path, rotated); err != nil {
			t.Fatal(err)
		}
		files = append(files, rotated)
		if err := r.Reopen(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Microsecond)
	}
	// A directory that cannot be opened for writing: the old file stays.
	if err := os.Mkdir(path+".dir", 0o755); err != nil {
		t.Fatal(err)
	}
	r.out.path = path + ".dir"
	if err := r.Reopen(); err == nil {
		t.Fatal("Reopen of a directory: no error")
	}
	wg.Wait()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if d := testutil.ToFloat64(r.dropped); d != 0 {
		t.Fatalf("dropped %v with room for all", d)
	}
	exactlyOnce(t, paths(t, append(files, path)...), n)
}

func TestNewFileError(t *testing.T) {
	if _, err := NewFile(prometheus.NewRegistry(), filepath.Join(t.TempDir(), "no", "such", "dir"), Options{}); err == nil {
		t.Fatal("no error for a path in a missing directory")
	}
}
