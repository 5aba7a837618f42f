package adminapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/anysched/anysched/internal/etcd/etcdhousekeep"
	"github.com/anysched/anysched/internal/etcd/etcdserver"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/wait"
	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// TestStatusShowsNoSpace: with the store out of space, Status says so
// (the alarm, the size against the quota) while writes fail; once the
// housekeeper may maintain, it clears the alarm and Status says that too.
func TestStatusShowsNoSpace(t *testing.T) {
	if testing.Short() {
		t.Skip("16 MiB through an embedded etcd: make test runs it plain, not under -race")
	}
	e := etcdtest.StartWith(t, etcdserver.EmbeddedOptions{QuotaBackendBytes: 16 << 20})
	cli := e.Client()
	etcdtest.FillToNoSpace(t, cli, e.Prefix, 4)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := etcdhousekeep.DefaultConfig()
	c.Interval, c.CompactInterval, c.MinHistory = 20*time.Millisecond, 20*time.Millisecond, 0
	var lead atomic.Bool
	h := etcdhousekeep.New(cli, c, etcdhousekeep.Options{Lead: func(context.Context) (bool, error) { return lead.Load(), nil }}, prometheus.NewRegistry(), quiet)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	defer func() { cancel(); <-done }()
	s := &Service{Store: e.Store(), Logger: quiet, EtcdHousekeeping: h.Status}
	status := func() *pb.EtcdStatus {
		resp, err := s.Status(context.Background(), &pb.StatusRequest{})
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		return resp.GetEtcd()
	}
	wait.For(t, "the housekeeper's first reading in Status", wait.DefaultTimeout, func() bool { return status() != nil })
	st := status()
	if len(st.GetAlarms()) != 1 || st.GetAlarms()[0].GetAlarm() != "NOSPACE" || st.GetAlarms()[0].GetMember() != "test" || st.GetLeading() {
		t.Fatalf("Status etcd %v: want NOSPACE on member test, watched only", st)
	}
	if m := st.GetMembers()[0]; m.GetQuotaBytes() != 16<<20 || m.GetDbSizeBytes() < m.GetQuotaBytes()*9/10 {
		t.Errorf("member %v: want a db near the 16 MiB quota", m)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if _, err := cli.Put(wctx, e.Prefix+"drain/server/s1", "{}"); !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Fatalf("a write: %v, want NOSPACE", err)
	}
	lead.Store(true)
	wait.For(t, "NOSPACE gone from Status", wait.DefaultTimeout, func() bool {
		st := status()
		return st.GetLeading() && len(st.GetAlarms()) == 0 && st.GetLastDefrag() != nil && st.GetCompactedRevision() > 0
	})
	if _, err := cli.Put(wctx, e.Prefix+"drain/server/s1", "{}"); err != nil {
		t.Fatalf("a write after the recovery: %v", err)
	}
}
