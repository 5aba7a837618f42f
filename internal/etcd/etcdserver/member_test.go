package etcdserver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdmember"
	"github.com/anysched/anysched/internal/etcd/etcdserver"
	"github.com/anysched/anysched/internal/testbed/port"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/anysched/anysched/internal/wiring/config"
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
			st, err := etcdmember.Get(ctx, addr)
			if err == nil && !st.Running {
				err = fmt.Errorf("%+v", st)
			}
			return err
		})
	}

	running := func(addr string) bool {
		st, err := etcdmember.Get(ctx, addr)
		return err == nil && st.Running
	}

	t.Logf("cluster up +%s", time.Since(start).Round(time.Millisecond))
	st, err := etcdmember.Stop(ctx, controls[0], 6*time.Second)
	if err != nil || st.Name != "m1" || st.Running {
		t.Fatalf("stop: %+v %v", st, err)
	}
	if _, err := etcdmember.Stop(ctx, controls[0], time.Second); err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("second stop of a stopped member: %v", err)
	}
	// Writes go on (after an election, if m1 led the cluster) while m1 is
	// down: try until one passes or m1 is back (too late).
	var werr error
	wait.Until(wait.DefaultTimeout, func() bool {
		werr = put()
		return werr == nil || running(controls[0])
	})
	if st, _ := etcdmember.Get(ctx, controls[0]); werr != nil || st.Running {
		t.Errorf("one member of three stopped (%+v): writes failed: %v", st, werr)
	}
	t.Logf("writes with m1 stopped +%s", time.Since(start).Round(time.Millisecond))
	waitRunning(controls[0])
	t.Logf("first member back +%s", time.Since(start).Round(time.Millisecond))

	// Two members, one of them serving a watch stream: etcd drains that
	// member's clients for its whole request timeout (~7 s) before it
	// leaves the group, voting all that while, so members stopped for a
	// fixed time from the request could overlap by little or not at all
	// (a drill once saw the store answer throughout a 6 s stop of two).
	// StopMembers waits until both have left, then holds them down
	// together for the whole 3 s.
	wcli, err := clientv3.New(clientv3.Config{Endpoints: []string{members[1].ClientURL}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer wcli.Close()
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	watch := wcli.Watch(wctx, "k")
	if err := put(); err != nil {
		t.Fatal(err)
	}
	select { // the stream is open: its first event came through
	case <-watch:
	case <-time.After(wait.DefaultTimeout):
		t.Fatal("no watch event")
	}
	asked := time.Now()
	names, until, err := etcdmember.StopAll(ctx, controls[1:], 3*time.Second, 30*time.Second)
	if err != nil || !slices.Equal(names, []string{"m2", "m3"}) {
		t.Fatalf("stop m2 and m3: %v %v", names, err)
	}
	downAt := time.Now()
	var lefts []string
	for _, c := range controls[1:] {
		st, _ := etcdmember.Get(ctx, c)
		if st.Running || st.Left.IsZero() || !st.Until.Equal(until) {
			t.Errorf("after StopMembers: %+v, want left and released at %s", st, until)
		}
		lefts = append(lefts, fmt.Sprintf("%s left +%s", st.Name, st.Left.Sub(asked).Round(time.Millisecond)))
	}
	t.Logf("%v; held down until +%s", lefts, until.Sub(asked).Round(time.Millisecond))
	// From now until their release no write passes: no quorum.
	var passed []time.Duration
	for time.Until(until) > 1600*time.Millisecond {
		if put() == nil {
			passed = append(passed, time.Since(downAt))
		}
	}
	if len(passed) > 0 {
		t.Errorf("two members of three down: writes passed at %v after both had left", passed)
	}
	t.Logf("quorum lost +%s", time.Since(start).Round(time.Millisecond))
	for _, c := range controls[1:] {
		waitRunning(c)
	}
	if back := time.Since(until); back < 0 {
		t.Errorf("a member ran %s before its release", -back)
	}
	t.Logf("members back +%s", time.Since(start).Round(time.Millisecond))
	if err := put(); err != nil {
		t.Errorf("members back: write failed: %v", err)
	}
	if _, err := etcdmember.Stop(ctx, controls[0], time.Hour); err == nil || !strings.Contains(err.Error(), "400") {
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
