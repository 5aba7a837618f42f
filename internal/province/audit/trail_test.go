package audit

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func count(t *testing.T, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix+"audit/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// TestRetention: the trail keeps the newest audit.keep records and none
// older than audit.max_age, trimming as it writes.
func TestRetention(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tr := New(cli, e.Prefix, Options{Keep: 5, MaxAge: 24 * time.Hour}, prometheus.NewRegistry(), log)
	tr.now = func() time.Time { return now }

	// Two records older than max_age, then twenty fresh ones.
	for i := range 2 {
		if err := tr.Write(ctx, Record{At: now.Add(-48*time.Hour + time.Duration(i)), Identity: "old", Method: "m", Code: "OK"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		if err := tr.Write(ctx, Record{At: now.Add(time.Duration(i) * time.Second), Identity: fmt.Sprint("op", i), Method: "m", Code: "OK"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, cli, e.Prefix); n != 5 {
		t.Errorf("%d records kept, want 5", n)
	}
	recs, err := tr.List(ctx, 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.Identity)
	}
	if fmt.Sprint(ids) != "[op19 op18 op17 op16 op15]" {
		t.Errorf("kept, newest first: %v", ids)
	}
	// since and limit.
	recs, _ = tr.List(ctx, 2, now.Add(17*time.Second))
	if len(recs) != 2 || recs[0].Identity != "op19" || recs[1].Identity != "op18" {
		t.Errorf("limit 2 since +17s: %v", recs)
	}
	recs, _ = tr.List(ctx, 0, now.Add(18*time.Second))
	if len(recs) != 2 {
		t.Errorf("since +18s: %v", recs)
	}

	// Age alone: a large keep, the clock moves past max_age.
	tr2 := New(cli, e.Prefix, Options{Keep: 10000, MaxAge: time.Hour}, prometheus.NewRegistry(), log)
	tr2.now = func() time.Time { return now.Add(2 * time.Hour) }
	if err := tr2.Trim(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, cli, e.Prefix); n != 0 {
		t.Errorf("%d records older than max_age left", n)
	}
}

// TestWriteFailureCounted: a record etcd does not take is an error, logged
// and counted in anysched_audit_write_failures_total.
func TestWriteFailureCounted(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client()
	reg := prometheus.NewRegistry()
	tr := New(cli, e.Prefix, Options{Keep: 10, MaxAge: time.Hour}, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	e.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := tr.Write(ctx, Record{Identity: "x", Method: "m", Code: "OK"}); err == nil {
		t.Fatal("a write with etcd down succeeded")
	}
	if n := testutil.ToFloat64(tr.Failures()); n != 1 {
		t.Errorf("failures = %v, want 1", n)
	}
	if n, err := testutil.GatherAndCount(reg, "anysched_audit_write_failures_total"); err != nil || n != 1 {
		t.Errorf("metric registered: %d, %v", n, err)
	}
}

// BenchmarkWrite: one audited call's cost in etcd, trimming included
// (keep 1000: a trim every 10 writes).
func BenchmarkWrite(b *testing.B) {
	e := etcdtest.Start(b)
	tr := New(e.Client(), e.Prefix, Options{Keep: 1000, MaxAge: time.Hour}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	for b.Loop() {
		if err := tr.Write(ctx, Record{Identity: "otto", Role: "operator", Peer: "172.16.0.9:51000", Method: "/anysched.v1.Admin/Drain", Target: "region/hefei", Code: "OK"}); err != nil {
			b.Fatal(err)
		}
	}
}

// Refused calls cost an attacker nothing: thousands of them must not push
// the record of a change out of the trail. They are kept and trimmed
// apart; List shows both, newest first.
func TestRefusalsDoNotEraseChanges(t *testing.T) {
	e := etcdtest.Start(t)
	ctx := context.Background()
	tr := New(e.Client(), e.Prefix, Options{Keep: 10}, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	if err := tr.Write(ctx, Record{At: now, Identity: "otto", Method: "/anysched.v1.Admin/ApplyTopology", Code: "OK", Revision: 7}); err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		code := []string{"PermissionDenied", "Unauthenticated"}[i%2]
		if err := tr.Write(ctx, Record{At: now.Add(time.Duration(i+1) * time.Second), Identity: "mallory", Method: "/anysched.v1.Admin/Drain", Code: code}); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := tr.List(ctx, 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	refused, change := 0, false
	for _, r := range recs {
		switch {
		case r.Identity == "otto" && r.Revision == 7:
			change = true
		case Refused(r.Code):
			refused++
		}
	}
	if !change {
		t.Fatalf("the change record is gone after 60 refused calls (%d records listed)", len(recs))
	}
	if refused < 10 || refused > 10+int(tr.trimEvery) {
		t.Errorf("%d refused records kept, want about audit.keep (10)", refused)
	}
	if recs[0].Identity != "mallory" || recs[len(recs)-1].Identity != "otto" {
		t.Errorf("not newest first: %s ... %s", recs[0].Identity, recs[len(recs)-1].Identity)
	}
	if two, _ := tr.List(ctx, 2, time.Time{}); len(two) != 2 || two[0].At.Before(two[1].At) {
		t.Errorf("List(2): %+v", two)
	}
}
