package opstate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/security/signing"
	"github.com/anysched/anysched/internal/stb/balance"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/logtest"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func signer(t *testing.T) *signing.Signer {
	t.Helper()
	k, err := signing.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return signing.NewSigner(k)
}

// verified is a watcher like a scheduler's with snapshot.trusted_keys.
type verified struct {
	*watched
	reg *prometheus.Registry
	log *logtest.Recorder
}

func watchVerified(t *testing.T, cli *clientv3.Client, trusted *signing.Signer, require bool) verified {
	t.Helper()
	v := verified{watched: &watched{}, reg: prometheus.NewRegistry(), log: logtest.New()}
	x := v.watched
	x.w = &opstate.Watcher{Client: cli, Prefix: prefix, Logger: v.log.Logger(), Verifier: signing.NewVerifier(trusted.Public()), RequireSigned: require,
		OnDrill: func(d opstate.Drill) {
			x.mu.Lock()
			x.drills = append(x.drills, d)
			x.mu.Unlock()
		}}
	x.w.Register(v.reg)
	run(t, x.w)
	return v
}

// metric sums the samples of a metric family whose labels include want.
func metric(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue next
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// TestUnsignedOrForgedDrainsRefused: at a scheduler with trusted keys, once
// the center signs, a drain written straight into etcd unsigned, signed
// by a key it does not trust, or signed for another key and moved, drains
// nothing; each is counted and logged once; the center's signed drains
// apply.
func TestUnsignedOrForgedDrainsRefused(t *testing.T) {
	s := snap(t)
	e := etcdtest.Start(t)
	cli := e.Client()
	ctx := context.Background()
	center, intruder := signer(t), signer(t)
	v := watchVerified(t, cli, center, false)
	x := v.w
	drain := func(sg *signing.Signer, i int) {
		t.Helper()
		if err := opstate.SetDrain(ctx, cli, prefix, sg, opstate.Drain{Kind: opstate.DrainServer, Name: s.Servers[i].Name}); err != nil {
			t.Fatal(err)
		}
	}
	drain(center, 0)
	wait.For(t, "the center's signed drain applied", wait.DefaultTimeout, func() bool { return x.DrainReasons(s)[0] != "" })

	drain(nil, 1)      // unsigned, after a signed value was seen
	drain(intruder, 2) // signed by an untrusted key
	resp, err := cli.Get(ctx, prefix+keyspace.Drain("server", s.Servers[0].Name))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("reading the signed drain back: %v", err)
	}
	moved := prefix + keyspace.Drain("server", s.Servers[3].Name)
	if _, err := cli.Put(ctx, moved, string(resp.Kvs[0].Value)); err != nil { // server 0's signed value at server 3's key
		t.Fatal(err)
	}
	// And a forged signature field on an otherwise plain drain.
	forged := fmt.Sprintf(`{"kind":"node","name":%q,"at":"2026-01-01T00:00:00Z","signature":{"key_id":%q,"signed_at":"2026-01-01T00:00:00Z","sig":"AAAA"}}`, s.Nodes[0].Name, center.KeyID())
	if _, err := cli.Put(ctx, prefix+keyspace.Drain("node", s.Nodes[0].Name), forged); err != nil {
		t.Fatal(err)
	}
	// A last signed write: the watch delivers in order, so once it is
	// seen the refused ones have been read.
	if _, err := opstate.SetBalance(ctx, cli, prefix, center, []byte("chash: {epsilon: 0.5}\n"), 0); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the signed balance document in force", wait.DefaultTimeout, func() bool { c, _ := x.Balance(); return c.CHash.Epsilon == 0.5 })
	r := x.DrainReasons(s)
	if r[0] == "" || r[1] != "" || r[2] != "" || r[3] != "" {
		t.Fatalf("drain reasons %q: want only server 0 (signed by the center) drained", r)
	}
	if n := len(x.Drains()); n != 1 {
		t.Errorf("%d drains in force, want 1: %+v", n, x.Drains())
	}
	for reason, want := range map[string]float64{"unsigned": 1, "unknown_key": 1, "bad_signature": 2} {
		if got := metric(t, v.reg, "anysched_opstate_refused_total", map[string]string{"kind": "drain", "reason": reason}); got != want {
			t.Errorf("anysched_opstate_refused_total{kind=drain,reason=%s} = %v, want %v", reason, got, want)
		}
	}
	if n := len(v.log.Containing(slog.LevelError, "refusing")); n != 4 {
		t.Errorf("%d refusals logged, want 4 (one each): %v", n, v.log.Records(slog.LevelError))
	}
	// A relisting (the feed lost and back) neither logs nor counts again.
	e.Stop()
	e.Restart()
	drain(center, 3) // at server 3's key: the signed drain replaces the moved one
	wait.For(t, "server 3 drained by the center", wait.DefaultTimeout, func() bool { return x.DrainReasons(s)[3] != "" })
	if n := len(v.log.Containing(slog.LevelError, "refusing")); n != 4 {
		t.Errorf("%d refusals logged after a relisting, want still 4", n)
	}
}

// TestForgedDrillAndBalanceRefused: with trusted keys and signatures
// required, an unsigned drill withdraws nothing and an unsigned or forged
// balance document is not in force (the defaults are, and say why).
func TestForgedDrillAndBalanceRefused(t *testing.T) {
	cli := etcdtest.Start(t).Client()
	ctx := context.Background()
	center, intruder := signer(t), signer(t)
	v := watchVerified(t, cli, center, true)
	x := v.w
	if _, err := opstate.StartDrill(ctx, cli, prefix, nil, opstate.RegionTarget("wuhu"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := opstate.StartDrill(ctx, cli, prefix, intruder, opstate.RegionTarget("bengbu"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := opstate.SetBalance(ctx, cli, prefix, intruder, []byte("chash: {epsilon: 0.5}\n"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := opstate.StartDrill(ctx, cli, prefix, center, opstate.RegionTarget("hefei"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the center's drill seen", wait.DefaultTimeout, func() bool { return len(v.seen()) > 0 })
	now := time.Now()
	if _, ok := x.Drill(opstate.RegionTarget("hefei"), now); !ok {
		t.Error("the center's signed drill is not in force")
	}
	for _, r := range []string{"wuhu", "bengbu"} {
		if _, ok := x.Drill(opstate.RegionTarget(r), now); ok {
			t.Errorf("%s's drill, not signed by a trusted key, is in force", r)
		}
	}
	if c, err := x.Balance(); c.CHash.Epsilon != 0.25 || err == nil {
		t.Errorf("balance policy %v (err %v): want the defaults, and why", c.CHash.Epsilon, err)
	}
	if got := metric(t, v.reg, "anysched_opstate_refused_total", map[string]string{"kind": "drill"}); got != 2 {
		t.Errorf("refused drills counted %v, want 2", got)
	}
	if got := metric(t, v.reg, "anysched_opstate_refused_total", map[string]string{"kind": "balance", "reason": "unknown_key"}); got != 1 {
		t.Errorf("refused balance documents counted %v, want 1", got)
	}
	// Signed by the center it is in force.
	sb, err := opstate.ReadBalance(ctx, cli, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := opstate.SetBalance(ctx, cli, prefix, center, []byte("chash: {epsilon: 0.5}\n"), sb.Revision); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the signed balance document in force", wait.DefaultTimeout, func() bool { c, err := x.Balance(); return err == nil && c.CHash.Epsilon == 0.5 })
}

// TestUnsignedAcceptedUntilSigned: a scheduler with trusted keys but
// without snapshot.opstate_signatures: required (the upgrade, with centers
// of the release before) uses unsigned state, counted, until it has seen
// a value the center signed.
func TestUnsignedAcceptedUntilSigned(t *testing.T) {
	s := snap(t)
	cli := etcdtest.Start(t).Client()
	ctx := context.Background()
	center := signer(t)
	v := watchVerified(t, cli, center, false)
	x := v.w
	if err := opstate.SetDrain(ctx, cli, prefix, nil, opstate.Drain{Kind: opstate.DrainServer, Name: s.Servers[0].Name}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the unsigned drain applied", wait.DefaultTimeout, func() bool { return x.DrainReasons(s)[0] != "" })
	if got := metric(t, v.reg, "anysched_opstate_unsigned_accepted_total", map[string]string{"kind": "drain"}); got != 1 {
		t.Errorf("unsigned drains accepted counted %v, want 1", got)
	}
	if n := len(v.log.Containing(slog.LevelWarn, "unsigned")); n != 1 {
		t.Errorf("%d warnings about unsigned state, want 1", n)
	}
	if err := opstate.SetDrain(ctx, cli, prefix, center, opstate.Drain{Kind: opstate.DrainServer, Name: s.Servers[1].Name}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the signed drain applied", wait.DefaultTimeout, func() bool { return x.DrainReasons(s)[1] != "" })
	if err := opstate.SetDrain(ctx, cli, prefix, nil, opstate.Drain{Kind: opstate.DrainServer, Name: s.Servers[2].Name}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "an unsigned drain refused once the center signs", wait.DefaultTimeout, func() bool {
		return metric(t, v.reg, "anysched_opstate_refused_total", map[string]string{"kind": "drain", "reason": "unsigned"}) == 1
	})
	if r := x.DrainReasons(s); r[2] != "" {
		t.Errorf("server 2 drained by an unsigned drain after the center signed: %q", r[2])
	}
}

// TestSignedStateReadableByTheReleaseBefore: what a signing center writes
// is read by the decoders of the release before (cities upgraded after
// the center, or rolled back): the drain and drill as JSON they decode
// leniently, the balance document as YAML whose signature is a comment.
func TestSignedStateReadableByTheReleaseBefore(t *testing.T) {
	cli := etcdtest.Start(t).Client()
	ctx := context.Background()
	center := signer(t)
	if err := opstate.SetDrain(ctx, cli, prefix, center, opstate.Drain{Kind: opstate.DrainServer, Name: "hefei-1-a", Reason: "disk", Forced: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := opstate.StartDrill(ctx, cli, prefix, center, opstate.RegionTarget("hefei"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	doc := "chash: {epsilon: 0.5}"
	if _, err := opstate.SetBalance(ctx, cli, prefix, center, []byte(doc), 0); err != nil {
		t.Fatal(err)
	}
	get := func(key string) []byte {
		t.Helper()
		resp, err := cli.Get(ctx, prefix+key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("get %s: %v", key, err)
		}
		return resp.Kvs[0].Value
	}
	var oldDrain struct { // the release before's Drain
		Kind   string    `json:"kind"`
		Name   string    `json:"name"`
		Reason string    `json:"reason,omitempty"`
		At     time.Time `json:"at"`
	}
	if raw := get(keyspace.Drain("server", "hefei-1-a")); json.Unmarshal(raw, &oldDrain) != nil || oldDrain.Name != "hefei-1-a" || oldDrain.Reason != "disk" || !strings.Contains(string(raw), `"signature"`) {
		t.Errorf("signed drain %s: the release before reads %+v", raw, oldDrain)
	}
	var oldDrill struct {
		Region string    `json:"region"`
		Until  time.Time `json:"until"`
	}
	if raw := get(keyspace.Drill("hefei")); json.Unmarshal(raw, &oldDrill) != nil || oldDrill.Region != "hefei" || oldDrill.Until.IsZero() {
		t.Errorf("signed drill %s: the release before reads %+v", raw, oldDrill)
	}
	raw := get(keyspace.KeyBalance)
	if c, err := balance.ParseConfig(raw); err != nil || c.CHash.Epsilon != 0.5 || !strings.Contains(string(raw), "# anysched-signature") {
		t.Errorf("signed balance document %q: the release before reads epsilon %v, %v", raw, c.CHash.Epsilon, err)
	}
	// The admin API shows the document without its signature.
	if sb, err := opstate.ReadBalance(ctx, cli, prefix); err != nil || string(sb.Document) != doc+"\n" {
		t.Errorf("ReadBalance = %q, %v; want the document alone", sb.Document, err)
	}
}

// TestSignUnsigned: an upgraded center signs what its predecessor wrote
// unsigned (a drill keeping its lease), so a scheduler requiring
// signatures keeps the operator's drains, drills and balance policy.
func TestSignUnsigned(t *testing.T) {
	s := snap(t)
	cli := etcdtest.Start(t).Client()
	ctx := context.Background()
	center := signer(t)
	if err := opstate.SetDrain(ctx, cli, prefix, nil, opstate.Drain{Kind: opstate.DrainServer, Name: s.Servers[0].Name}); err != nil {
		t.Fatal(err)
	}
	if _, err := opstate.StartDrill(ctx, cli, prefix, nil, opstate.RegionTarget("hefei"), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := opstate.SetBalance(ctx, cli, prefix, nil, []byte("chash: {epsilon: 0.5}\n"), 0); err != nil {
		t.Fatal(err)
	}
	n, err := opstate.SignUnsigned(ctx, cli, prefix, center)
	if err != nil || n != 3 {
		t.Fatalf("SignUnsigned = %d, %v; want 3 signed", n, err)
	}
	if n, err := opstate.SignUnsigned(ctx, cli, prefix, center); err != nil || n != 0 {
		t.Fatalf("SignUnsigned again = %d, %v; want nothing left to sign", n, err)
	}
	resp, err := cli.Get(ctx, prefix+keyspace.Drill("hefei"))
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
		t.Fatalf("the signed drill lost its lease: %v %v", resp, err)
	}
	v := watchVerified(t, cli, center, true)
	x := v.w
	if r := x.DrainReasons(s); r[0] == "" {
		t.Error("the re-signed drain is not in force")
	}
	if _, ok := x.Drill(opstate.RegionTarget("hefei"), time.Now()); !ok {
		t.Error("the re-signed drill is not in force")
	}
	if c, err := x.Balance(); err != nil || c.CHash.Epsilon != 0.5 {
		t.Errorf("the re-signed balance policy is not in force: %v, %v", c.CHash.Epsilon, err)
	}
}
