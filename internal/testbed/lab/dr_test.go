package lab_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/testbed/lab"
	"github.com/anysched/anysched/internal/testbed/wait"
)

// TestPrivilegedStoreLoss: the province's store is lost whole twice under
// STB load and rebuilt, once from a backup older than what the schedulers
// serve and once from nothing plus a re-apply of the topology and the
// drain; a city's scheduler restarts from its disk cache while the store
// is empty. After each rebuild every scheduler is ready and serves the
// store's document (schedctl status: each instance's digest the store's),
// whatever the revisions and sequences say; no STB request fails.
func TestPrivilegedStoreLoss(t *testing.T) {
	began := time.Now()
	cities := []string{"hefei", "wuhu"}
	const restarted = "wuhu"
	l := province(t, "dr", cities, nil)
	for i, c := range cities {
		answeredBy(t, l, i, lab.PrimaryID(c), 60*time.Second)
	}
	drained := drainable(t, l.Topo)
	ctlOK(t, l, "drain", "server", drained, "--reason", "store-loss drill")
	applied := converged(t, l, "", len(cities)+1)
	up := time.Since(began)

	ld := startLoad(t, l, cities)
	for _, c := range cities {
		ld.waitBy(t, c, lab.PrimaryID(c), 10)
	}
	backupFile := filepath.Join(l.Dir(), "province.backup")
	ctlOK(t, l, "backup", "--out", backupFile)
	info, err := os.Stat(backupFile)
	if err != nil {
		t.Fatal(err)
	}
	// The province moves on after the backup: the schedulers serve a
	// newer document (a later sequence) than the backup holds.
	newer := reweighed(t, l)
	ctlOK(t, l, "apply", "--yes", "-f", newer)
	moved := converged(t, l, "", len(cities)+1)
	if moved == applied {
		t.Fatalf("the re-weighed topology has the digest of the first, %s", moved)
	}

	// Loss 1, rebuilt from the backup; wuhu's scheduler restarts from its
	// disk cache while the store is empty.
	t1 := time.Now()
	loseStore(t, l)
	restartFromCache(t, l, restarted, len(cities), moved)
	ctlRetry(t, l, "restore", "-f", backupFile)
	if got := converged(t, l, applied, len(cities)+1); got != applied {
		t.Fatalf("after the restore the store holds %s, want the backup's %s", got, applied)
	}
	if n := drains(t, l); n != 1 {
		t.Errorf("after the restore the store holds %d drains, want the backup's 1", n)
	}
	citiesDrain(t, l, cities, 1)
	fromBackup := time.Since(t1)

	// Loss 2, rebuilt from nothing: the topology and the drain applied again.
	t2 := time.Now()
	loseStore(t, l)
	// The cities follow the empty store's operator state, not the lost one's.
	citiesDrain(t, l, cities, 0)
	ctlRetry(t, l, "apply", "--yes", "-f", newer)
	ctlOK(t, l, "drain", "server", drained, "--reason", "store-loss drill")
	converged(t, l, moved, len(cities)+1)
	citiesDrain(t, l, cities, 1)
	fromNothing := time.Since(t2)

	ld.stop(t)
	for _, c := range cities {
		req, failed, retried, by := ld.totals(c)
		t.Logf("%s: %d requests, %d failed, %d needed a retry, answered by %v", c, req, failed, retried, by)
		if failed != 0 || req == 0 {
			t.Errorf("%s: %d of %d STB requests failed", c, failed, req)
		}
	}
	t.Logf("figures: lab up and applied in %.1fs; backup %d bytes; rebuilt from the backup in %.1fs, from nothing in %.1fs; %.1fs in all",
		up.Seconds(), info.Size(), fromBackup.Seconds(), fromNothing.Seconds(), time.Since(began).Seconds())
}

// drainable is a server whose node keeps another, so that draining it
// empties nothing.
func drainable(t *testing.T, topo *topology.Topology) string {
	t.Helper()
	for _, n := range topo.Nodes {
		if len(n.Servers) > 1 {
			return n.Servers[len(n.Servers)-1].Name
		}
	}
	t.Fatal("no node with two servers in the lab's topology")
	return ""
}

// reweighed writes the lab's topology with its first server's weight
// changed, and returns its path.
func reweighed(t *testing.T, l *lab.Lab) string {
	t.Helper()
	s := &l.Topo.Nodes[0].Servers[0]
	was := s.Weight
	s.Weight = was + 7
	data, err := topogen.YAML(l.Topo)
	s.Weight = was
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(l.Dir(), "topology-reweighed.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// loseStore stops the center, deletes its embedded etcd's data and starts
// it again on an empty store (it serves from its disk cache meanwhile).
func loseStore(t *testing.T, l *lab.Lab) {
	t.Helper()
	p := l.Proc(lab.CenterID)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !p.Wait(20 * time.Second) {
		t.Fatal("the center did not stop within 20s")
	}
	if err := os.RemoveAll(filepath.Join(l.Dir(), "etcd")); err != nil {
		t.Fatal(err)
	}
	if err := l.Restart(lab.CenterID); err != nil {
		t.Fatal(err)
	}
}

// restartFromCache restarts city's scheduler once the center answers
// again and routes all n cities' STBs (its STBs fall back to it
// meanwhile), while the store is empty: it comes up ready from its disk
// cache, serving the lost store's document (digest cached).
func restartFromCache(t *testing.T, l *lab.Lab, city string, n int, cached string) {
	t.Helper()
	wait.ForErr(t, "the center's admin API on an empty store", 30*time.Second, func() error {
		var out bytesBuf
		if err := runCtl(l, &out, "status"); err != nil {
			return fmt.Errorf("%v: %s", err, out.String())
		}
		return nil
	})
	for i := range n {
		centerRouted(t, l, i)
	}
	p := l.Proc(lab.PrimaryID(city))
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !p.Wait(15 * time.Second) {
		t.Fatalf("%s's scheduler did not stop within 15s", city)
	}
	if err := l.Restart(lab.PrimaryID(city)); err != nil {
		t.Fatal(err)
	}
	// Ready on the empty store with what its cache holds.
	wait.ForErr(t, city+"'s scheduler ready from its disk cache", 30*time.Second, func() error {
		st, err := status(l)
		if err != nil {
			return err
		}
		if st.Digest != "" {
			return fmt.Errorf("the store holds %.12s already", st.Digest)
		}
		for _, in := range st.Instances {
			if in.ID == lab.PrimaryID(city) && in.State == "ready" && in.Digest == cached {
				return nil
			}
		}
		return fmt.Errorf("not ready with %.12s: %+v", cached, st.Instances)
	})
}

// provinceStatus is what the drill reads of schedctl status -o json.
type provinceStatus struct {
	Digest    string `json:"digest"`
	Instances []struct {
		ID     string `json:"id"`
		State  string `json:"state"`
		Digest string `json:"snapshot_digest"`
	} `json:"instances"`
}

func status(l *lab.Lab) (provinceStatus, error) {
	var out bytesBuf
	var st provinceStatus
	if err := runCtl(l, &out, "status", "-o", "json"); err != nil {
		return st, fmt.Errorf("status: %v: %s", err, out.String())
	}
	if err := json.Unmarshal([]byte(out.String()), &st); err != nil {
		return st, fmt.Errorf("status -o json: %v", err)
	}
	return st, nil
}

func ctlOK(t *testing.T, l *lab.Lab, args ...string) {
	t.Helper()
	var out bytesBuf
	if err := runCtl(l, &out, args...); err != nil {
		t.Fatalf("schedctl %v: %v\n%s", args, err, out.String())
	}
	t.Logf("schedctl %v:\n%s", args, out.String())
}

// ctlRetry runs schedctl until it succeeds: the center's admin API comes
// back with the center.
func ctlRetry(t *testing.T, l *lab.Lab, args ...string) {
	t.Helper()
	var out bytesBuf
	wait.ForErr(t, fmt.Sprintf("schedctl %v", args), 30*time.Second, func() error {
		out = bytesBuf{}
		if err := runCtl(l, &out, args...); err != nil {
			return fmt.Errorf("%v: %s", err, out.String())
		}
		return nil
	})
	t.Logf("schedctl %v:\n%s", args, out.String())
}

// converged waits until the store holds a topology (want, when not "")
// and all n instances are ready and serve its digest, as schedctl status
// shows them; it returns the store's digest.
func converged(t *testing.T, l *lab.Lab, want string, n int) string {
	t.Helper()
	var digest string
	var table bytesBuf
	wait.ForErr(t, "every instance ready, serving the store's digest", 60*time.Second, func() error {
		st, err := status(l)
		if err != nil {
			return err
		}
		switch {
		case st.Digest == "":
			return fmt.Errorf("the store holds no topology")
		case want != "" && st.Digest != want:
			return fmt.Errorf("the store holds %.12s, want %.12s", st.Digest, want)
		case len(st.Instances) != n:
			return fmt.Errorf("%d instances registered, want %d", len(st.Instances), n)
		}
		for _, in := range st.Instances {
			if in.State != "ready" || in.Digest != st.Digest {
				return fmt.Errorf("%s: %s, serving %.12s; the store holds %.12s", in.ID, in.State, in.Digest, st.Digest)
			}
		}
		digest = st.Digest
		return nil
	})
	if err := runCtl(l, &table, "status"); err == nil {
		t.Logf("schedctl status:\n%s", table.String())
	}
	return digest
}

// citiesDrain waits until every city's scheduler has n drains in force
// (anysched_opstate_drains): what it follows of the store's operator state.
func citiesDrain(t *testing.T, l *lab.Lab, cities []string, n int) {
	t.Helper()
	want := fmt.Sprintf("anysched_opstate_drains %d\n", n)
	for _, c := range cities {
		wait.ForErr(t, fmt.Sprintf("%s following %d drain(s)", c, n), 30*time.Second, func() error {
			m, err := l.AdminGet(context.Background(), lab.PrimaryID(c), "/metrics")
			if err != nil {
				return err
			}
			if !strings.Contains(m, want) {
				return fmt.Errorf("no %q in its metrics", strings.TrimSpace(want))
			}
			return nil
		})
	}
}

// drains is how many drains the store holds (schedctl drains).
func drains(t *testing.T, l *lab.Lab) int {
	t.Helper()
	var out bytesBuf
	if err := runCtl(l, &out, "drains", "-o", "json"); err != nil {
		t.Fatalf("drains: %v\n%s", err, out.String())
	}
	var v struct {
		Drains []json.RawMessage `json:"drains"`
	}
	if err := json.Unmarshal([]byte(out.String()), &v); err != nil {
		t.Fatalf("drains -o json: %v\n%s", err, out.String())
	}
	return len(v.Drains)
}
