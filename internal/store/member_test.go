package store_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/config"
	"github.com/anysched/anysched/internal/store"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestMemberControlQuorum runs a 3-member cluster on loopback with a control
// endpoint per member: one member stopped keeps the quorum (writes go on),
// two lose it (writes fail), and the members come back by themselves.
func TestMemberControlQuorum(t *testing.T) {
	start := time.Now()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfgs := make([]config.Embedded, 3)
	var peers []string
	for i := range cfgs {
		cfgs[i] = config.Embedded{Name: fmt.Sprintf("m%d", i+1), Dir: t.TempDir(), ClientListen: etcdtest.FreePort(t), PeerListen: etcdtest.FreePort(t)}
		peers = append(peers, cfgs[i].Name+"=http://"+cfgs[i].PeerListen)
	}
	members := make([]*store.Embedded, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range cfgs { // a member is ready only once a quorum runs: start them together
		wg.Go(func() {
			members[i], errs[i] = store.StartEmbedded(ctx, cfgs[i], store.EmbeddedOptions{InitialCluster: strings.Join(peers, ","), ClusterToken: "t"}, log)
		})
	}
	wg.Wait()
	var controls []string
	var endpoints []string
	for i, m := range members {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		defer m.Close()
		srv := httptest.NewServer(&store.MemberControl{Etcd: m, Ctx: ctx, Log: log})
		defer srv.Close()
		controls = append(controls, strings.TrimPrefix(srv.URL, "http://"))
		endpoints = append(endpoints, m.ClientURL)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	put := func() error {
		c, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		_, err := cli.Put(c, "k", "v")
		return err
	}
	waitRunning := func(addr string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if st, err := store.GetMember(ctx, addr); err == nil && st.Running {
				return
			}
		}
		t.Fatalf("member at %s did not come back", addr)
	}

	t.Logf("cluster up +%s", time.Since(start).Round(time.Millisecond))
	st, err := store.StopMember(ctx, controls[0], 4*time.Second)
	if err != nil || st.Name != "m1" || st.Running || st.Until.IsZero() {
		t.Fatalf("stop: %+v %v", st, err)
	}
	if _, err := store.StopMember(ctx, controls[0], time.Second); err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("second stop of a stopped member: %v", err)
	}
	// Writes go on (after an election, if m1 led the cluster) while m1 is down.
	var werr error
	for deadline := time.Now().Add(3500 * time.Millisecond); time.Now().Before(deadline); {
		if werr = put(); werr == nil {
			break
		}
	}
	if st, _ := store.GetMember(ctx, controls[0]); werr != nil || st.Running {
		t.Errorf("one member of three stopped (%+v): writes failed: %v", st, werr)
	}
	t.Logf("writes with m1 stopped +%s", time.Since(start).Round(time.Millisecond))
	waitRunning(controls[0])
	t.Logf("first member back +%s", time.Since(start).Round(time.Millisecond))

	for _, c := range controls[1:] {
		if _, err := store.StopMember(ctx, c, 2*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	lost := false
	for deadline := time.Now().Add(5 * time.Second); !lost && time.Now().Before(deadline); {
		lost = put() != nil // the stops run in the background: a write may still pass at first
	}
	if !lost {
		t.Error("two members of three stopped: writes still succeed without a quorum")
	}
	t.Logf("quorum lost +%s", time.Since(start).Round(time.Millisecond))
	for _, c := range controls[1:] {
		waitRunning(c)
	}
	t.Logf("members back +%s", time.Since(start).Round(time.Millisecond))
	if err := put(); err != nil {
		t.Errorf("members back: write failed: %v", err)
	}
	if _, err := store.StopMember(ctx, controls[0], time.Hour); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("an hour: %v", err)
	}
}
