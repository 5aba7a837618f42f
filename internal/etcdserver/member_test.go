package etcdserver_test

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
	"github.com/anysched/anysched/internal/etcdserver"
	"github.com/anysched/anysched/internal/testbed/port"
	"github.com/anysched/anysched/internal/testbed/wait"
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
	var members []*etcdserver.Embedded
	for attempt := 1; ; attempt++ {
		var err error
		if members, err = startCluster(ctx, t, log); err == nil {
			break
		} else if !port.InUse(err) || attempt == 5 {
			t.Fatal(err)
		}
		t.Logf("attempt %d: %v; again on other ports", attempt, err)
	}
	var controls []string
	var endpoints []string
	for _, m := range members {
		defer m.Close()
		srv := httptest.NewServer(&etcdserver.MemberControl{Etcd: m, Ctx: ctx, Log: log})
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
		wait.ForErr(t, "member at "+addr+" back", 30*time.Second, func() error {
			st, err := etcdserver.GetMember(ctx, addr)
			if err == nil && !st.Running {
				err = fmt.Errorf("%+v", st)
			}
			return err
		})
	}

	running := func(addr string) bool {
		st, err := etcdserver.GetMember(ctx, addr)
		return err == nil && st.Running
	}

	t.Logf("cluster up +%s", time.Since(start).Round(time.Millisecond))
	st, err := etcdserver.StopMember(ctx, controls[0], 6*time.Second)
	if err != nil || st.Name != "m1" || st.Running || st.Until.IsZero() {
		t.Fatalf("stop: %+v %v", st, err)
	}
	if _, err := etcdserver.StopMember(ctx, controls[0], time.Second); err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("second stop of a stopped member: %v", err)
	}
	// Writes go on (after an election, if m1 led the cluster) while m1 is
	// down: try until one passes or m1 is back (too late).
	var werr error
	wait.Until(wait.DefaultTimeout, func() bool {
		werr = put()
		return werr == nil || running(controls[0])
	})
	if st, _ := etcdserver.GetMember(ctx, controls[0]); werr != nil || st.Running {
		t.Errorf("one member of three stopped (%+v): writes failed: %v", st, werr)
	}
	t.Logf("writes with m1 stopped +%s", time.Since(start).Round(time.Millisecond))
	waitRunning(controls[0])
	t.Logf("first member back +%s", time.Since(start).Round(time.Millisecond))

	for _, c := range controls[1:] {
		if _, err := etcdserver.StopMember(ctx, c, 4*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// The stops run in the background: a write may still pass at first. Try
	// until one fails or the members are back (too late).
	lost := false
	wait.Until(wait.DefaultTimeout, func() bool {
		lost = put() != nil
		return lost || running(controls[1]) || running(controls[2])
	})
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
	if _, err := etcdserver.StopMember(ctx, controls[0], time.Hour); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("an hour: %v", err)
	}
}

// startCluster starts a 3-member cluster on loopback. A member must know its
// peers' URLs before it starts, so the ports are picked first (all six at
// once: they differ); another process may take one before etcd binds it,
// and then the start fails with an error port.InUse recognises, after
// stopping whatever did start: the caller tries again on other ports.
func startCluster(ctx context.Context, t *testing.T, log *slog.Logger) ([]*etcdserver.Embedded, error) {
	t.Helper()
	addrs := port.Pick(t, 6)
	cfgs := make([]config.Embedded, 3)
	var peers []string
	for i := range cfgs {
		cfgs[i] = config.Embedded{Name: fmt.Sprintf("m%d", i+1), Dir: t.TempDir(), ClientListen: addrs[2*i], PeerListen: addrs[2*i+1]}
		peers = append(peers, cfgs[i].Name+"=http://"+cfgs[i].PeerListen)
	}
	// One member failing to bind must not leave the others waiting 60 s for
	// a quorum: its failure cancels their start.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	members := make([]*etcdserver.Embedded, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range cfgs { // a member is ready only once a quorum runs: start them together
		wg.Go(func() {
			members[i], errs[i] = etcdserver.StartEmbedded(sctx, cfgs[i], etcdserver.EmbeddedOptions{InitialCluster: strings.Join(peers, ","), ClusterToken: "t"}, log)
			if errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	var first error
	for _, err := range errs {
		if err != nil && (first == nil || port.InUse(err)) {
			first = err // the bind failure rather than the others' cancellation
		}
	}
	if first == nil {
		return members, nil
	}
	for _, m := range members {
		if m != nil {
			m.Close()
		}
	}
	return nil, first
}
