package certstore

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestSwapUnderLoad: new TLS connections from several goroutines while the
// files are replaced (temporary file, rename) and Reload is called, with
// Run's poll racing it: no handshake fails, each sees a certificate of
// the files, and once Reload returns new handshakes see the new one.
func TestSwapUnderLoad(t *testing.T) {
	const conns, workers, swaps = 300, 6, 5
	const per = conns / (swaps + 1) // handshakes between swaps
	ca, dir := newTestCA(t), t.TempDir()
	gens := make([]leaf, swaps+1)
	known := map[string]bool{}
	for i := range gens {
		gens[i] = ca.sign(t, leafSpec{names: []string{"live.iptv.example"}, rsa: i%2 == 1})
		known[gens[i].serial] = true
	}
	s, err := New(Options{Pairs: []Pair{install(t, dir, "live", gens[0])}, ReloadInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runStore(t, s)
	addr := tlsServer(t, s.TLSConfig())
	client := &tls.Config{RootCAs: ca.pool, ServerName: "live.iptv.example"}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	swapped := make([]chan struct{}, swaps+1) // swapped[i] closes after swap i
	for i := range swapped {
		swapped[i] = make(chan struct{})
	}
	var (
		next, done atomic.Int64
		mu         sync.Mutex
		failures   []string
		wg         sync.WaitGroup
	)
	fail := func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(f, a...))
	}
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				j := int(next.Add(1))
				if j > conns {
					return
				}
				// Handshake j may run at most one period ahead of the
				// swaps, so that every swap overlaps handshakes.
				if k := (j-1)/per - 1; k >= 1 && k <= swaps {
					select {
					case <-swapped[k]:
					case <-ctx.Done():
						fail("handshake %d: gave up waiting for swap %d", j, k)
						return
					}
				}
				cs, err := dial(addr, client)
				switch {
				case err != nil:
					fail("handshake %d: %v", j, err)
				case !known[peerSerial(cs)]:
					fail("handshake %d: unknown certificate %s", j, peerSerial(cs))
				}
				done.Add(1)
			}
		}()
	}
	for i := 1; i <= swaps; i++ {
		eventually(t, 30*time.Second, fmt.Sprintf("%d handshakes", i*per), func() bool { return done.Load() >= int64(i*per) })
		install(t, dir, "live", gens[i])
		if err := s.Reload(); err != nil {
			t.Fatalf("swap %d: Reload: %v", i, err)
		}
		if cs, err := dial(addr, client); err != nil || peerSerial(cs) != gens[i].serial {
			t.Fatalf("after swap %d: got %s (err %v), want %s", i, peerSerial(cs), err, gens[i].serial)
		}
		close(swapped[i])
	}
	wg.Wait()
	t.Logf("%d handshakes in %v; reloads: %v ok, %v refused (a poll between the two renames)", done.Load(), time.Since(start).Round(time.Millisecond), testutil.ToFloat64(s.m.reloadOK), testutil.ToFloat64(s.m.reloadErr))
	if len(failures) > 0 {
		t.Fatalf("%d of %d handshakes failed: %v", len(failures), conns, failures)
	}
	if n := done.Load(); n != conns {
		t.Fatalf("%d handshakes, want %d", n, conns)
	}
	if cs, err := dial(addr, client); err != nil || peerSerial(cs) != gens[swaps].serial {
		t.Fatalf("after the load: got %s (err %v), want %s", peerSerial(cs), err, gens[swaps].serial)
	}
}
