package etcdauth_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdauth"
	"github.com/anysched/anysched/internal/etcd/etcdclient"
	"github.com/anysched/anysched/internal/etcd/etcdhousekeep"
	"github.com/anysched/anysched/internal/etcd/etcdserver"
	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/security/pki"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/anysched/anysched/internal/testbed/logtest"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/anysched/anysched/internal/wiring/config"
	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const prefix = "/anysched/"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// cluster is a real embedded etcd serving https with client certificates
// of its own CA required, as the center runs it with etcd.embedded.tls.
type cluster struct {
	t      *testing.T
	dir    string
	ca     *pki.CA
	caFile string
	emb    *etcdserver.Embedded
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("anysched test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile, _, err := ca.WriteCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.WriteLeaf(dir, "etcd-server", pki.Leaf{CN: "etcd", Hosts: []string{"127.0.0.1", "localhost"}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	emb, err := etcdserver.StartEmbedded(context.Background(), config.Embedded{
		Dir: filepath.Join(dir, "etcd"), ClientListen: "127.0.0.1:0", PeerListen: "127.0.0.1:0", Name: "test",
		TLS: config.ServerTLS{CertFile: cert, KeyFile: key, ClientCAFile: caFile},
	}, etcdserver.EmbeddedOptions{}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Close)
	if !strings.HasPrefix(emb.ClientURL, "https://") {
		t.Fatalf("embedded etcd with etcd.embedded.tls serves %s, want https", emb.ClientURL)
	}
	return &cluster{t: t, dir: dir, ca: ca, caFile: caFile, emb: emb}
}

// client connects with a client certificate of CN cn ("" for none).
func (c *cluster) client(cn string) *clientv3.Client {
	c.t.Helper()
	tls := config.ClientTLS{CAFile: c.caFile}
	if cn != "" {
		cert, key, err := c.ca.WriteLeaf(c.dir, strings.ReplaceAll(cn, "/", "_"), pki.Leaf{CN: cn, Client: true})
		if err != nil {
			c.t.Fatal(err)
		}
		tls.CertFile, tls.KeyFile = cert, key
	}
	cli, err := etcdclient.Connect(config.Etcd{DialTimeout: 2 * time.Second, TLS: tls}, []string{c.emb.ClientURL}, quiet)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

var identities = []string{
	"anysched-regional.hefei.hefei-1",
	"anysched-regional.hefei.hefei-2",
	"anysched-regional.wuhu.wuhu-1+checker",
	"anysched-checker.hefei.chk-1",
	"anysched-checker.center.central-1",
}

// provision runs etcdauth as the center does at bootstrap.
func (c *cluster) provision(cli *clientv3.Client, specs []string, o etcdauth.Options) []etcdauth.Change {
	c.t.Helper()
	ids, err := etcdauth.ParseIdentities(specs)
	if err != nil {
		c.t.Fatal(err)
	}
	o.Prefix = prefix
	changes, err := etcdauth.Provision(ctx(c.t), cli, ids, o)
	if err != nil {
		c.t.Fatal(err)
	}
	return changes
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func denied(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("%s: err = %v, want permission denied", what, err)
	}
}

func allowed(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// TestProvisionedRoles: after provisioning every daemon runs its real code
// paths against the authenticated etcd, and nothing beyond them: a city's
// credentials cannot rewrite the topology, a drain, another city's claims
// or a checker's verdicts; a checker writes only its own verdicts.
func TestProvisionedRoles(t *testing.T) {
	c := newCluster(t)
	center := c.client(etcdauth.CenterIdentity)
	if changes := c.provision(center, identities, etcdauth.Options{CenterRoot: true}); len(changes) == 0 {
		t.Fatal("first provisioning changed nothing")
	}

	// The center: topology, drains, drills, the leader lookup.
	cst := store.New(center, prefix, quiet)
	applied, err := cst.Apply(ctx(t), fixture.Weighted(t, 100), store.ApplyOptions{})
	allowed(t, "center applies a topology", err)
	allowed(t, "center drains", opstate.SetDrain(ctx(t), center, prefix, nil, opstate.Drain{Kind: opstate.DrainServer, Name: "s1", Reason: "test"}))
	_, err = opstate.StartDrill(ctx(t), center, prefix, nil, opstate.RegionTarget("hefei"), 5*time.Second)
	allowed(t, "center starts a drill", err)
	_, err = center.MemberList(ctx(t))
	allowed(t, "center lists members", err)
	_, err = center.Status(ctx(t), c.emb.ClientURL)
	allowed(t, "center reads member status", err)
	_, err = center.Put(ctx(t), prefix+keyspace.KeyBalance, "{}")
	allowed(t, "center writes balance/config", err)

	// A regional scheduler.
	hefei := c.client("anysched-regional.hefei.hefei-1")
	hst := store.New(hefei, prefix, quiet)
	cur, err := hst.Current(ctx(t))
	allowed(t, "regional reads the topology", err)
	if err == nil && cur.Revision != applied.Revision {
		t.Errorf("regional read revision %d, want %d", cur.Revision, applied.Revision)
	}
	_, err = hefei.Get(ctx(t), prefix+keyspace.PrefixDrain, clientv3.WithPrefix())
	allowed(t, "regional reads drains", err)
	// A watch (the feeds' and the syncer's) needs read on its range.
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	wch := hst.WatchCurrent(wctx)
	// Registration under a lease, refreshed, then revoked on stop.
	rctx, rcancel := context.WithCancel(context.Background())
	regDone := make(chan error, 1)
	reg := &store.Registration{Store: hst, TTL: 5 * time.Second, Interval: 100 * time.Millisecond,
		Current: func() store.Instance { return store.Instance{ID: "hefei-1", Role: "regional", Region: "hefei"} }}
	go func() { regDone <- reg.Run(rctx) }()
	wait.For(t, "the regional's registration", 5*time.Second, func() bool {
		ins, err := cst.Instances(ctx(t))
		return err == nil && len(ins) == 1 && ins[0].ID == "hefei-1"
	})
	rcancel()
	<-regDone
	wait.For(t, "the registration withdrawn (its lease revoked)", 5*time.Second, func() bool {
		ins, err := cst.Instances(ctx(t))
		return err == nil && len(ins) == 0
	})
	// Allocation claims: a compare-and-swap over the region's claims.
	board := &store.ClaimBoard{Store: hst, Region: "hefei", Instance: "hefei-1", TTL: 5 * time.Second}
	_, rev, err := board.Peers(ctx(t))
	allowed(t, "regional reads its region's claims", err)
	ok, err := board.Commit(ctx(t), store.Claims{Sessions: 1, Servers: map[string]store.Claim{"s1": {BandwidthKbps: 1}}}, rev)
	allowed(t, "regional commits its claims", err)
	if err == nil && !ok {
		t.Error("claims commit lost a race nobody ran")
	}
	allowed(t, "regional releases its claims", board.Release(ctx(t)))
	// What a city's credentials must not do.
	for _, key := range []string{
		keyspace.KeyTopologyCurrent, keyspace.PrefixTopologyBlobs + "x/000000",
		keyspace.PrefixInstances + "hefei-2", keyspace.PrefixInstances + "hefei-1x",
		keyspace.Instance("wuhu", "hefei-1"), keyspace.Instance(keyspace.ProvinceRegion, "hefei-1"), keyspace.Instance("hefei", "hefei-2"),
		keyspace.PrefixAllocClaims + "hefei/hefei-2", keyspace.PrefixAllocClaims + "wuhu/hefei-1",
		keyspace.PrefixDrain + "server/s1", keyspace.PrefixDrill + "hefei", keyspace.KeyBalance,
		keyspace.Verdict("hefei", "hefei-1", "s1"), keyspace.Verdict("hefei", "chk-1", "s1"), keyspace.Checker("hefei", "hefei-1"),
		"audit/1",
	} {
		_, err := hefei.Put(ctx(t), prefix+key, "x")
		denied(t, "regional writes "+key, err)
	}
	_, err = hefei.Delete(ctx(t), prefix+keyspace.PrefixDrain, clientv3.WithPrefix())
	denied(t, "regional deletes the drains", err)
	// Plan states hold viewers: a city reads its own region's, not another's.
	allowed(t, "center writes wuhu's plan state", func() error {
		_, err := center.Put(ctx(t), prefix+keyspace.AllocStateHead("wuhu", "wuhu-1"), "x")
		return err
	}())
	_, err = hefei.Get(ctx(t), prefix+keyspace.AllocStates("hefei"), clientv3.WithPrefix())
	allowed(t, "regional reads its region's plan states", err)
	_, err = hefei.Get(ctx(t), prefix+keyspace.AllocStates("wuhu"), clientv3.WithPrefix())
	denied(t, "regional reads another region's plan states", err)
	_, err = hefei.Get(ctx(t), prefix+keyspace.PrefixAllocState, clientv3.WithPrefix())
	denied(t, "regional reads every plan state", err)
	_, err = hefei.Get(ctx(t), prefix+keyspace.PrefixAllocClaims, clientv3.WithPrefix())
	allowed(t, "regional reads the claims", err)
	_, err = hefei.Get(ctx(t), prefix+keyspace.KeyBalance)
	allowed(t, "regional reads balance/config", err)
	_, err = hefei.Put(ctx(t), "/elsewhere", "x")
	denied(t, "regional writes outside the prefix", err)
	_, err = hefei.Get(ctx(t), "/elsewhere")
	denied(t, "regional reads outside the prefix", err)
	select {
	case <-wch: // no event expected yet; a closed channel would be a refused watch
		t.Error("the regional's watch ended or fired early")
	default:
	}
	_, err = cst.Apply(ctx(t), fixture.Weighted(t, 200), store.ApplyOptions{})
	allowed(t, "center applies again", err)
	select {
	case wr, ok := <-wch:
		if !ok || wr.Err() != nil || len(wr.Events) == 0 {
			t.Errorf("the regional's watch: ok %v err %v", ok, wr.Err())
		}
	case <-time.After(5 * time.Second):
		t.Error("the regional's watch saw no change of topology/current")
	}

	// A checker: publishes its verdicts on its region's servers, and
	// nothing else. The region its identity names is the only one it
	// may write under, so a merger may trust the region of its keys.
	chk := c.client("anysched-checker.hefei.chk-1")
	publish(t, chk, "hefei", "chk-1", center)
	_, err = chk.Get(ctx(t), prefix+keyspace.AllocStates("hefei"), clientv3.WithPrefix())
	denied(t, "checker reads plan states", err)
	for _, key := range []string{
		keyspace.Verdict("wuhu", "chk-1", "s1"), keyspace.Checker("wuhu", "chk-1"), // another region
		keyspace.Verdict(keyspace.ProvinceRegion, "chk-1", "s1"), keyspace.Checker(keyspace.ProvinceRegion, "chk-1"), // the province
		keyspace.Verdict("hefei", "chk-2", "s1"), keyspace.Verdict("hefei", "chk-1x", "s1"), keyspace.Checker("hefei", "chk-2"),
		keyspace.PrefixHealth + "chk-1/s1", keyspace.PrefixCheckers + "chk-1", // the layout before regions
		keyspace.PrefixInstances + "chk-1", keyspace.KeyTopologyCurrent, keyspace.PrefixDrain + "server/s1",
	} {
		_, err := chk.Put(ctx(t), prefix+key, "x")
		denied(t, "checker writes "+key, err)
	}
	// A publisher claiming another region than its identity's writes
	// nothing.
	rec := logtest.New()
	lying := &health.Publisher{Client: chk, Prefix: prefix, Info: avail.CheckerInfo{ID: "chk-1", Region: "wuhu"}, TTL: 3 * time.Second, Logger: rec.Logger()}
	pctx, pcancel := context.WithCancel(context.Background())
	pdone := make(chan error, 1)
	go func() { pdone <- lying.Run(pctx) }()
	lying.Publish(health.Report{Server: "wuhu-s1", Up: true, At: time.Now()})
	wait.For(t, "the lying publisher refused", 5*time.Second, func() bool {
		return len(rec.Containing(slog.LevelWarn, "publishing verdicts failed")) > 0
	})
	pcancel()
	<-pdone
	if r, err := center.Get(ctx(t), prefix+keyspace.PrefixHealth, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || r.Count != 0 {
		t.Errorf("after a checker of hefei published as wuhu's: %v keys under health/ (err %v), want none", r.Count, err)
	}
	// A province-wide checker (region center) writes under the province.
	publish(t, c.client("anysched-checker.center.central-1"), keyspace.ProvinceRegion, "central-1", center)
	// A regional with an embedded checker publishes as a checker of its
	// instance id, in its region only.
	wuhu := c.client("anysched-regional.wuhu.wuhu-1")
	publish(t, wuhu, "wuhu", "wuhu-1", center)
	for _, key := range []string{keyspace.Verdict("hefei", "wuhu-1", "s1"), keyspace.Verdict(keyspace.ProvinceRegion, "wuhu-1", "s1")} {
		_, err := wuhu.Put(ctx(t), prefix+key, "x")
		denied(t, "an embedded checker writes "+key, err)
	}
	_, err = c.client("anysched-regional.hefei.hefei-2").Put(ctx(t), prefix+keyspace.Verdict("hefei", "hefei-2", "s1"), "x")
	denied(t, "a regional without an embedded checker writes verdicts", err)
}

// TestMaintenancePermissions: etcd lets only the root role compact,
// defragment and disarm; the center's user has it when provisioned with
// CenterRoot (its embedded etcd; schedctl etcd-roles by default), and a
// city or a checker never: they may read the status and the alarms, as
// anyone etcd knows. Without the root role the center's housekeeper only
// watches and says once why.
func TestMaintenancePermissions(t *testing.T) {
	c := newCluster(t)
	root := c.client(etcdauth.RootUser)
	c.provision(root, identities, etcdauth.Options{CenterRoot: true})
	maintenance := func(cli *clientv3.Client) (compact, defrag, disarm, status, alarms error) {
		r, err := cli.Put(ctx(t), prefix+keyspace.PrefixInstances+"x", "x")
		rev := int64(1)
		if err == nil {
			rev = r.Header.Revision
		}
		_, compact = cli.Compact(ctx(t), rev)
		_, defrag = cli.Defragment(ctx(t), c.emb.ClientURL)
		st, status := cli.Status(ctx(t), c.emb.ClientURL)
		member := uint64(1)
		if status == nil {
			member = st.Header.MemberId
		}
		_, disarm = cli.AlarmDisarm(ctx(t), &clientv3.AlarmMember{MemberID: member, Alarm: pb.AlarmType_NOSPACE})
		_, alarms = cli.AlarmList(ctx(t))
		return
	}
	center := c.client(etcdauth.CenterIdentity)
	compact, defrag, disarm, status, alarms := maintenance(center)
	allowed(t, "center compacts", compact)
	allowed(t, "center defragments", defrag)
	allowed(t, "center disarms", disarm)
	allowed(t, "center reads the status", status)
	allowed(t, "center lists the alarms", alarms)
	for _, who := range []string{"anysched-regional.hefei.hefei-1", "anysched-regional.wuhu.wuhu-1", "anysched-checker.hefei.chk-1"} {
		compact, defrag, disarm, status, alarms := maintenance(c.client(who))
		denied(t, who+" compacts", compact)
		denied(t, who+" defragments", defrag)
		denied(t, who+" disarms", disarm)
		allowed(t, who+" reads the status", status)
		allowed(t, who+" lists the alarms", alarms)
	}

	// Confined to the prefix (schedctl etcd-roles --center-maintenance=false).
	c.provision(root, identities, etcdauth.Options{})
	compact, defrag, disarm, status, alarms = maintenance(center)
	denied(t, "a confined center compacts", compact)
	denied(t, "a confined center defragments", defrag)
	denied(t, "a confined center disarms", disarm)
	allowed(t, "a confined center reads the status", status)
	allowed(t, "a confined center lists the alarms", alarms)
	rec := logtest.New()
	hc := etcdhousekeep.DefaultConfig()
	hc.Interval, hc.CompactInterval, hc.MinHistory, hc.KeepRevisions = 20*time.Millisecond, 20*time.Millisecond, 0, 1
	reg := prometheus.NewRegistry()
	h := etcdhousekeep.New(center, hc, etcdhousekeep.Options{}, reg, rec.Logger())
	hctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(hctx) }()
	defer func() { cancel(); <-done }()
	for i := range 3 {
		_, err := center.Put(ctx(t), fmt.Sprintf("%s%s%d", prefix, keyspace.PrefixDrain, i), "x")
		allowed(t, "a confined center writes its prefix", err)
	}
	wait.For(t, "the housekeeper's problem", 5*time.Second, func() bool {
		s := h.Status()
		return len(s.Members) == 1 && len(s.Problems) == 1 && strings.Contains(s.Problems[0], "root role")
	})
	at := h.Status().At
	wait.For(t, "more rounds", 5*time.Second, func() bool { return h.Status().At.After(at.Add(3 * hc.Interval)) })
	if errs := rec.Records(slog.LevelError); len(errs) != 1 || !strings.Contains(errs[0].Message, "schedctl etcd-roles --center-maintenance") {
		t.Errorf("logged at ERROR %v, want one message saying how to grant the root role", errs)
	}
}

// publish runs a health.Publisher as checker id of region over cli and
// waits for its verdict and liveness record, read back by the center.
func publish(t *testing.T, cli *clientv3.Client, region, id string, center *clientv3.Client) {
	t.Helper()
	pctx, cancel := context.WithCancel(context.Background())
	p := &health.Publisher{Client: cli, Prefix: prefix, Info: avail.CheckerInfo{ID: id, Region: region}, TTL: 3 * time.Second, Logger: quiet}
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	p.Publish(health.Report{Server: "s1", Checker: id, Up: true, At: time.Now()})
	want := []string{prefix + keyspace.Verdict(region, id, "s1"), prefix + keyspace.Checker(region, id)}
	wait.For(t, id+"'s verdict in etcd", 5*time.Second, func() bool {
		for _, k := range want {
			r, err := center.Get(ctx(t), k)
			if err != nil || len(r.Kvs) != 1 {
				return false
			}
		}
		return true
	})
	p.Forget(context.Background(), "s1")
	r, err := center.Get(ctx(t), want[0])
	if err != nil || len(r.Kvs) != 0 {
		t.Errorf("%s could not withdraw its verdict: %v", id, err)
	}
	cancel()
	<-done
	wait.For(t, id+"'s lease revoked", 5*time.Second, func() bool {
		r, err := center.Get(ctx(t), want[1])
		return err == nil && len(r.Kvs) == 0
	})
}

// TestStrangersRefused: without a certificate of the CA nobody connects;
// with one whose CN is no provisioned user nothing is read or written.
func TestStrangersRefused(t *testing.T) {
	c := newCluster(t)
	c.provision(c.client(etcdauth.CenterIdentity), identities, etcdauth.Options{CenterRoot: true})

	short, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := c.client("").Get(short, prefix, clientv3.WithPrefix()); err == nil {
		t.Error("a client without a certificate listed the keys")
	}
	stranger := c.client("anysched-regional.hefei.stranger")
	if _, err := stranger.Get(ctx(t), prefix, clientv3.WithPrefix()); err == nil {
		t.Error("an unprovisioned user listed the keys")
	}
	if _, err := stranger.Put(ctx(t), prefix+keyspace.PrefixDrain+"region/hefei", `{"kind":"region","name":"hefei"}`); err == nil {
		t.Error("an unprovisioned user wrote a drain")
	}
	// etcd grants leases to any client its CA vouches for, user or not
	// (checked with v3.7): harmless without a key to attach them to, and
	// why the CA must sign only the province's daemons (docs/security.md).
	if _, err := etcdauth.Plan(ctx(t), stranger, nil, etcdauth.Options{Prefix: prefix}); err == nil {
		t.Error("an unprovisioned user read the users and roles")
	}
}

// TestIdempotent: provisioning again changes nothing; a permission added by
// hand is revoked, a user dropped from the list is deleted with Prune.
func TestIdempotent(t *testing.T) {
	c := newCluster(t)
	center := c.client(etcdauth.CenterIdentity)
	c.provision(center, identities, etcdauth.Options{CenterRoot: true})
	if again := c.provision(center, identities, etcdauth.Options{CenterRoot: true}); len(again) != 0 {
		t.Fatalf("second provisioning changed %v", again)
	}
	// Someone widened a city's role by hand.
	if _, err := center.RoleGrantPermission(ctx(t), "anysched-regional.hefei.hefei-1", prefix+keyspace.PrefixDrain, clientv3.GetPrefixRangeEnd(prefix+keyspace.PrefixDrain), etcdauth.ReadWrite); err != nil {
		t.Fatal(err)
	}
	fixed := c.provision(center, identities, etcdauth.Options{CenterRoot: true})
	if len(fixed) != 1 || !strings.Contains(fixed[0].What, "revoke readwrite "+prefix+keyspace.PrefixDrain) {
		t.Fatalf("after a hand-made grant: %v, want one revocation", fixed)
	}
	hefei := c.client("anysched-regional.hefei.hefei-1")
	_, err := hefei.Put(ctx(t), prefix+keyspace.PrefixDrain+"region/hefei", "x")
	denied(t, "the revoked permission", err)
	// hefei-2 decommissioned.
	fewer := []string{identities[0], identities[2], identities[3], identities[4]}
	pruned := c.provision(center, fewer, etcdauth.Options{CenterRoot: true, Prune: true})
	if len(pruned) != 2 || pruned[0].What != "delete user anysched-regional.hefei.hefei-2 (not listed)" || pruned[1].What != "delete role anysched-regional.hefei.hefei-2 (not listed)" {
		t.Fatalf("pruning: %v", pruned)
	}
	_, err = c.client("anysched-regional.hefei.hefei-2").Get(ctx(t), prefix+keyspace.KeyTopologyCurrent)
	if err == nil {
		t.Error("a pruned user still reads")
	}
	if again := c.provision(center, fewer, etcdauth.Options{CenterRoot: true, Prune: true}); len(again) != 0 {
		t.Fatalf("after pruning: %v", again)
	}
}

// TestExternalCluster: an external cluster is provisioned with the
// operator's root certificate; the center then stays confined to its
// prefix and cannot manage users itself.
func TestExternalCluster(t *testing.T) {
	c := newCluster(t)
	root := c.client(etcdauth.RootUser)
	changes := c.provision(root, identities, etcdauth.Options{})
	if changes[len(changes)-1].What != "enable authentication" {
		t.Fatalf("the last change is %q, want the auth enabling", changes[len(changes)-1].What)
	}
	center := c.client(etcdauth.CenterIdentity)
	_, err := store.New(center, prefix, quiet).Apply(ctx(t), fixture.Weighted(t, 100), store.ApplyOptions{})
	allowed(t, "center applies a topology", err)
	allowed(t, "center drains", opstate.SetDrain(ctx(t), center, prefix, nil, opstate.Drain{Kind: opstate.DrainRegion, Name: "hefei"}))
	_, err = opstate.StartDrill(ctx(t), center, prefix, nil, opstate.RegionTarget("hefei"), 5*time.Second)
	allowed(t, "center starts a drill", err)
	// The etcd-loss drill's leader lookup needs a known user, no role.
	_, err = center.MemberList(ctx(t))
	allowed(t, "center lists members", err)
	_, err = center.Status(ctx(t), c.emb.ClientURL)
	allowed(t, "center reads member status", err)
	_, err = center.Put(ctx(t), "/other-province/topology/current", "x")
	denied(t, "center writes outside its prefix", err)
	if _, err := etcdauth.Plan(ctx(t), center, nil, etcdauth.Options{Prefix: prefix}); err == nil || !strings.Contains(err.Error(), "root") {
		t.Errorf("center reading users on an external cluster: %v, want refused (root only)", err)
	}
	if again := c.provision(root, identities, etcdauth.Options{}); len(again) != 0 {
		t.Fatalf("second provisioning changed %v", again)
	}
}
