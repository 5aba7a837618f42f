package etcdguard_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/anysched/anysched/internal/etcd/etcdauth"
	"github.com/anysched/anysched/internal/etcd/etcdguard"
	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/logtest"
	"github.com/anysched/anysched/internal/testbed/wait"
)

const (
	city    = "anysched-regional.hefei.hefei-1"
	other   = "anysched-regional.wuhu.wuhu-1"
	checker = "anysched-checker.hefei.c1"
)

// province is an etcd with auth on, the anysched roles of three
// identities (as etcdauth provisions them), and a client of each.
type province struct {
	e       *etcdtest.Etcd
	root    *clientv3.Client
	clients map[string]*clientv3.Client
}

func newProvince(t *testing.T) *province {
	t.Helper()
	e := etcdtest.Start(t)
	e.EnableAuth(e.Identity(city), e.Identity(other), e.Identity(checker))
	p := &province{e: e, root: e.Login(etcdauth.RootUser), clients: map[string]*clientv3.Client{}}
	for _, name := range []string{city, other, checker} {
		p.clients[name] = e.Login(name)
	}
	return p
}

func (p *province) put(name, key string, size int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := p.clients[name].Put(ctx, p.e.Prefix+key, strings.Repeat("x", size))
	return err
}

func (p *province) runGuard(t *testing.T, c etcdguard.Config) (*etcdguard.Guard, *prometheus.Registry, *logtest.Recorder) {
	t.Helper()
	reg := prometheus.NewRegistry()
	logs := logtest.New()
	g := etcdguard.New(p.root, p.e.Prefix, c, etcdguard.Options{}, reg, logs.Logger())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return g, reg, logs
}

func denied(err error) bool { return errors.Is(err, rpctypes.ErrPermissionDenied) }

// TestCityWritingTooMuchIsCut: etcd's roles let a city write its plan
// state's prefix without bound, and a compromised city could fill etcd's
// quota (NOSPACE stops the province). The guard revokes the writes of an
// identity past its bytes a minute, records why, keeps them revoked after
// a center's restart re-provisions the roles, and grants them back when
// the operator deletes the record; the other identities write on.
func TestCityWritingTooMuchIsCut(t *testing.T) {
	p := newProvince(t)
	cfg := etcdguard.Config{BytesPerMinute: 1 << 20, Keys: 1_000, Revoke: true}
	g, reg, _ := p.runGuard(t, cfg)
	part := keyspace.AllocState("hefei", "hefei-1")
	// Under the bound: fine. The guard's watch is set up asynchronously:
	// a few puts before it are not counted, so write until cut.
	if err := p.put(city, part+"0", 100<<10); err != nil {
		t.Fatalf("a city's first plan-state part: %v", err)
	}
	var cutAt int
	wait.For(t, "the city's writes revoked", 30*time.Second, func() bool {
		cutAt++
		return denied(p.put(city, fmt.Sprintf("%s%d", part, cutAt), 200<<10))
	})
	if cutAt > 20 {
		t.Errorf("cut after %d parts of 200 KiB, over five times the 1 MiB a minute", cutAt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.clients[city].Get(ctx, p.e.Prefix+keyspace.KeyTopologyCurrent); err != nil {
		t.Errorf("the cut city can no longer read: %v", err)
	}
	rec, err := p.root.Get(ctx, p.e.Prefix+keyspace.PrefixGuardRevoked+city)
	if err != nil || len(rec.Kvs) != 1 || !strings.Contains(string(rec.Kvs[0].Value), "bytes_per_minute") {
		t.Fatalf("the revocation record: %v, %v", rec, err)
	}
	if got := testutil.ToFloat64(metricOf(t, reg, city)); got != 1 {
		t.Errorf("anysched_etcdguard_revoked_bool{identity=%q} = %v, want 1", city, got)
	}
	if rs := g.Revoked(); len(rs) != 1 || rs[0].Identity != city {
		t.Errorf("Revoked() = %+v", rs)
	}
	if err := p.put(other, keyspace.AllocState("wuhu", "wuhu-1")+"0", 100<<10); err != nil {
		t.Errorf("another city, within its bound, was cut too: %v", err)
	}

	// A center's restart provisions the roles afresh; its guard revokes
	// them again from the record.
	if err := etcdtest.Grant(ctx, p.root, p.e.Identity(city)); err != nil {
		t.Fatal(err)
	}
	if err := p.put(city, part+"again", 10); err != nil {
		t.Fatalf("re-provisioned: %v", err)
	}
	p.runGuard(t, cfg)
	wait.For(t, "the writes revoked again by the new guard", 10*time.Second, func() bool { return denied(p.put(city, part+"again", 10)) })

	// The operator deletes the record: writes granted back, by both guards
	// (idempotent), and the city starts a fresh minute.
	if _, err := p.root.Delete(ctx, p.e.Prefix+keyspace.PrefixGuardRevoked+city); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the writes granted back", 10*time.Second, func() bool { return p.put(city, part+"back", 10) == nil })
	if got := testutil.ToFloat64(metricOf(t, reg, city)); got != 0 {
		t.Errorf("revoked gauge after the record's deletion = %v, want 0", got)
	}
}

// TestCheckerHoldingTooManyKeysIsCut: small writes, but ever more keys.
func TestCheckerHoldingTooManyKeysIsCut(t *testing.T) {
	p := newProvince(t)
	p.runGuard(t, etcdguard.Config{BytesPerMinute: 64 << 20, Keys: 40, Revoke: true})
	n := 0
	wait.For(t, "the checker's writes revoked", 30*time.Second, func() bool {
		n++
		return denied(p.put(checker, fmt.Sprintf("%sserver-%d", keyspace.Verdicts("hefei", "c1"), n), 10))
	})
	if n > 80 {
		t.Errorf("cut at key %d, bound 40", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec, err := p.root.Get(ctx, p.e.Prefix+keyspace.PrefixGuardRevoked+checker)
	if err != nil || len(rec.Kvs) != 1 || !strings.Contains(string(rec.Kvs[0].Value), "etcd.write_guard.keys 40") {
		t.Fatalf("the revocation record: %v, %v", rec, err)
	}
}

// TestReportOnly: with revoke off, an identity past its bound is reported
// (metric, one error log) and keeps writing.
func TestReportOnly(t *testing.T) {
	p := newProvince(t)
	_, reg, logs := p.runGuard(t, etcdguard.Config{BytesPerMinute: 1 << 20, Keys: 1_000, Revoke: false})
	wait.For(t, "the city reported past its bound", 30*time.Second, func() bool {
		if err := p.put(city, keyspace.AllocState("hefei", "hefei-1")+"p", 300<<10); err != nil {
			t.Fatalf("revoke off, yet: %v", err)
		}
		m, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range m {
			if mf.GetName() == "anysched_etcdguard_over_bound_total" && len(mf.GetMetric()) > 0 {
				return true
			}
		}
		return false
	})
	if found := len(logs.Containing(slog.LevelError, "identity past its etcd write bound")); found != 1 {
		t.Errorf("%d errors logged for the identity past its bound, want one", found)
	}
}

func metricOf(t *testing.T, reg *prometheus.Registry, identity string) prometheus.Collector {
	t.Helper()
	v := 0.0
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "anysched_etcdguard_revoked_bool" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "identity" && l.GetValue() == identity {
					v = m.GetGauge().GetValue()
				}
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
	g.Set(v)
	return g
}
