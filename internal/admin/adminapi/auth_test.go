package adminapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/province/audit"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/security/pki"
	"github.com/anysched/anysched/internal/security/tlsutil"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/anysched/anysched/internal/testbed/syncbuf"
	"github.com/anysched/anysched/internal/wiring/config"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
)

// TestRoleTableCoversEveryMethod: every method the admin server carries has
// a role; one that is not in the table is refused.
func TestRoleTableCoversEveryMethod(t *testing.T) {
	for _, sd := range []grpc.ServiceDesc{pb.Admin_ServiceDesc, healthpb.Health_ServiceDesc, reflectionv1.ServerReflection_ServiceDesc, reflectionv1alpha.ServerReflection_ServiceDesc} {
		var names []string
		for _, m := range sd.Methods {
			names = append(names, m.MethodName)
		}
		for _, s := range sd.Streams {
			names = append(names, s.StreamName)
		}
		for _, n := range names {
			if _, ok := methodRule("/" + sd.ServiceName + "/" + n); !ok {
				t.Errorf("/%s/%s has no role in the table", sd.ServiceName, n)
			}
		}
	}
	g := &guard{}
	err := g.authorize("/anysched.v1.Admin/Future", authz.Caller{Identity: "root", Role: authz.Admin})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "not in the admin API's role table") {
		t.Errorf("a method outside the table: %v", err)
	}
}

// certs is a province's admin PKI, written for a test.
type certs struct {
	dir              string
	ca               string
	serverCert       string
	serverKey        string
	clients          map[string][2]string // name → cert, key
	otherCert, other string
}

func writeCerts(t *testing.T) certs {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("anysched admin CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile, _, err := ca.WriteCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := certs{dir: dir, ca: caFile, clients: map[string][2]string{}}
	if c.serverCert, c.serverKey, err = ca.WriteLeaf(dir, "server", pki.Leaf{CN: "center", Hosts: []string{"127.0.0.1"}, Server: true}); err != nil {
		t.Fatal(err)
	}
	for name, role := range map[string]string{"vera": "viewer", "otto": "operator", "ada": "admin", "nobody": ""} {
		cert, key, err := ca.WriteLeaf(dir, name, pki.Leaf{CN: name, Role: role, Client: true})
		if err != nil {
			t.Fatal(err)
		}
		c.clients[name] = [2]string{cert, key}
	}
	other, err := pki.NewCA("some other CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if c.otherCert, c.other, err = other.WriteLeaf(dir, "mallory", pki.Leaf{CN: "mallory", Role: "admin", Client: true}); err != nil {
		t.Fatal(err)
	}
	return c
}

// serve runs the admin server of svc on 127.0.0.1:0 with c (Listen is set
// here) and returns its address.
func serve(t *testing.T, c config.GRPC, svc *Service, log *slog.Logger) string {
	t.Helper()
	c.Listen = "127.0.0.1:0"
	srv, _, err := NewServer(c, svc, log)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

func mustTLS(t *testing.T, c certs, name string) *tls.Config {
	t.Helper()
	tc, err := tlsutil.Client(config.ClientTLS{CAFile: c.ca, CertFile: c.clients[name][0], KeyFile: c.clients[name][1]})
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

func dialTLS(t *testing.T, addr, ca, cert, key string) pb.AdminClient {
	t.Helper()
	tc, err := tlsutil.Client(config.ClientTLS{CAFile: ca, CertFile: cert, KeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(pb.MaxMessageBytes)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewAdminClient(conn)
}

func dialPlain(t *testing.T, addr string) pb.AdminClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewAdminClient(conn)
}

// province is a real etcd with a small topology's engine and the
// schedulers' registrations, behind an admin server with mutual TLS.
type province struct {
	etcd   *etcdtest.Etcd
	st     *store.Store
	svc    *Service
	trail  *audit.Trail
	reg    *prometheus.Registry
	log    *syncbuf.Buffer
	addr   string
	certs  certs
	client map[string]pb.AdminClient
}

func newProvince(t *testing.T, lab bool) *province {
	t.Helper()
	p := &province{etcd: etcdtest.Start(t), reg: prometheus.NewRegistry(), log: &syncbuf.Buffer{}, certs: writeCerts(t), client: map[string]pb.AdminClient{}}
	p.st = p.etcd.Store()
	log := slog.New(slog.NewTextHandler(p.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p.trail = audit.New(p.st.Client(), p.st.Prefix(), audit.Options{Keep: 1000, MaxAge: time.Hour}, p.reg, log)
	eng := steer.New(fixture.Compile(t, fixture.Province(t)), steer.Options{})
	p.svc = &Service{Store: p.st, Logger: log, Lab: lab, Trail: p.trail, Engine: func() *steer.Engine { return eng }}
	p.addr = serve(t, config.GRPC{TLS: config.ServerTLS{CertFile: p.certs.serverCert, KeyFile: p.certs.serverKey, ClientCAFile: p.certs.ca}, MaxRequestBytes: 1 << 20}, p.svc, log)
	for name, kc := range p.certs.clients {
		p.client[name] = dialTLS(t, p.addr, p.certs.ca, kc[0], kc[1])
	}
	return p
}

// register writes scheduler registrations as the schedulers do.
func register(t *testing.T, st *store.Store, ins ...store.Instance) {
	t.Helper()
	for _, in := range ins {
		b, _ := json.Marshal(in)
		if _, err := st.Client().Put(context.Background(), st.Prefix()+in.Key(), string(b)); err != nil {
			t.Fatal(err)
		}
	}
}

func center(announced bool) store.Instance {
	return store.Instance{ID: "center-1", Role: "central", Announced: announced}
}

func city(region string, announced bool) store.Instance {
	return store.Instance{ID: region + "-1", Role: "regional", Region: region, Announced: announced}
}

func wantCode(t *testing.T, what string, err error, code codes.Code, parts ...string) {
	t.Helper()
	if status.Code(err) != code {
		t.Errorf("%s: %v, want %s", what, err, code)
		return
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %q does not say %q", what, err, p)
		}
	}
}

// TestRoles: each role does what it may and is refused the rest, with a
// message naming the method, the role needed and the caller; a certificate
// without a role gets nothing; one from another CA fails the handshake.
func TestRoles(t *testing.T) {
	p := newProvince(t, false)
	p.svc.AllowProductionDrills = true
	register(t, p.st, center(true), city("syn-1", true), city("syn-2", true), city("syn-3", true))
	ctx := context.Background()

	who, err := p.client["vera"].WhoAmI(ctx, &pb.WhoAmIRequest{})
	if err != nil || who.GetIdentity() != "vera" || who.GetRole() != "viewer" || !strings.HasPrefix(who.GetPeer(), "127.0.0.1:") {
		t.Errorf("whoami as vera: %v, %v", who, err)
	}
	if _, err := p.client["vera"].Status(ctx, &pb.StatusRequest{}); status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.Unauthenticated {
		t.Errorf("a viewer's status: %v", err)
	}
	_, err = p.client["vera"].ApplyTopology(ctx, &pb.ApplyTopologyRequest{Document: []byte("x"), DryRun: true})
	wantCode(t, "viewer applies", err, codes.PermissionDenied, "/anysched.v1.Admin/ApplyTopology needs the operator role", "CN=vera", "viewer role")
	_, err = p.client["vera"].Drain(ctx, &pb.DrainRequest{Kind: "region", Name: "syn-1"})
	wantCode(t, "viewer drains", err, codes.PermissionDenied, "Drain needs the operator role")
	_, err = p.client["nobody"].Status(ctx, &pb.StatusRequest{})
	wantCode(t, "no role", err, codes.PermissionDenied, "no anysched role in the client certificate of CN=nobody")
	_, err = p.client["otto"].Rollback(ctx, &pb.RollbackRequest{Revision: 1})
	wantCode(t, "operator rolls back", err, codes.PermissionDenied, "Rollback needs the admin role", "CN=otto")
	if _, err := p.client["ada"].Rollback(ctx, &pb.RollbackRequest{Revision: 1}); status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.Unauthenticated {
		t.Errorf("an admin's rollback was refused: %v", err)
	}
	// A server: a region drain needs --force as admin (the removal guard).
	if _, err := p.client["otto"].Drain(ctx, &pb.DrainRequest{Kind: "server", Name: "syn-1-1-a", Reason: "maintenance"}); err != nil {
		t.Errorf("an operator's drain: %v", err)
	}

	// Production drills: admin, the server's switch and the confirmation.
	drill := &pb.DrillRequest{Region: "syn-2", DurationSeconds: 30, ProductionConfirmed: true}
	_, err = p.client["otto"].Drill(ctx, drill)
	wantCode(t, "operator's production drill", err, codes.PermissionDenied, "needs the admin role", "CN=otto")
	p.svc.AllowProductionDrills = false
	_, err = p.client["ada"].Drill(ctx, drill)
	wantCode(t, "production drill switched off", err, codes.FailedPrecondition, "drills.allow_production")
	p.svc.AllowProductionDrills = true
	_, err = p.client["ada"].Drill(ctx, &pb.DrillRequest{Region: "syn-2", DurationSeconds: 30})
	wantCode(t, "unconfirmed production drill", err, codes.FailedPrecondition, "--i-know-this-is-production")
	if _, err := p.client["ada"].Drill(ctx, drill); err != nil {
		t.Errorf("an admin's confirmed production drill: %v", err)
	}

	// gRPC health: a viewer's read, nothing without a role.
	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(credentials.NewTLS(mustTLS(t, p.certs, "vera"))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) == codes.PermissionDenied {
		t.Errorf("a viewer's health check: %v", err)
	}
	conn2, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(credentials.NewTLS(mustTLS(t, p.certs, "nobody"))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	w, err := healthpb.NewHealthClient(conn2).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = w.Recv()
	}
	wantCode(t, "health watch (a stream) without a role", err, codes.PermissionDenied, "no anysched role")

	// Another CA: refused at the handshake, before any method runs.
	mallory := dialTLS(t, p.addr, p.certs.ca, p.certs.otherCert, p.certs.other)
	_, err = mallory.WhoAmI(ctx, &pb.WhoAmIRequest{})
	wantCode(t, "a certificate of another CA", err, codes.Unavailable)
	// No certificate: refused at the handshake too.
	anon := dialTLS(t, p.addr, p.certs.ca, "", "")
	_, err = anon.WhoAmI(ctx, &pb.WhoAmIRequest{})
	wantCode(t, "no client certificate", err, codes.Unavailable)

	// The audit trail: who, from where, what, outcome; reads that went
	// through are not in it, refusals are.
	got, err := p.client["vera"].Audit(ctx, &pb.AuditRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range got.GetEntries() {
		if e.GetIdentity() == "" || !strings.HasPrefix(e.GetPeer(), "127.0.0.1:") || e.GetAt() == nil {
			t.Errorf("an entry without who or where: %v", e)
		}
		lines = append(lines, strings.Join([]string{e.GetIdentity(), e.GetRole(), strings.TrimPrefix(e.GetMethod(), "/anysched.v1.Admin/"), e.GetTarget(), e.GetCode()}, " "))
	}
	want := []string{ // newest first
		"nobody none /grpc.health.v1.Health/Watch  PermissionDenied",
		"ada admin Drill drill/syn-2 OK",
		"ada admin Drill drill/syn-2 FailedPrecondition",
		"ada admin Drill drill/syn-2 FailedPrecondition",
		"otto operator Drill drill/syn-2 PermissionDenied",
		"otto operator Drain server/syn-1-1-a OK",
	}
	if len(lines) < len(want) || strings.Join(lines[:len(want)], "\n") != strings.Join(want, "\n") {
		t.Errorf("audit, newest first:\n%s\nwant first:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	all := strings.Join(lines, "\n")
	for _, w := range []string{"vera viewer ApplyTopology  PermissionDenied", "vera viewer Drain  PermissionDenied", "nobody none Status  PermissionDenied", "otto operator Rollback  PermissionDenied"} {
		if !strings.Contains(all, w) {
			t.Errorf("audit lacks %q:\n%s", w, all)
		}
	}
	for _, no := range []string{"WhoAmI", "vera viewer Status", "Audit"} {
		if strings.Contains(all, no) {
			t.Errorf("audit records a read that went through (%s):\n%s", no, all)
		}
	}
	limited, err := p.client["vera"].Audit(ctx, &pb.AuditRequest{Limit: 2})
	if err != nil || len(limited.GetEntries()) != 2 || limited.GetEntries()[1].GetCode() != "OK" {
		t.Errorf("audit --limit 2: %v, %v", limited, err)
	}
	// The log line of a change names who and from where.
	if l := p.log.String(); !strings.Contains(l, `msg="admin call" method=/anysched.v1.Admin/Drain identity=otto role=operator peer=127.0.0.1:`) {
		t.Errorf("the admin call log line lacks identity and peer:\n%s", l)
	}
	if n := testutil.ToFloat64(p.trail.Failures()); n != 0 {
		t.Errorf("audit write failures: %v", n)
	}
}

// TestLoopbackPlaintext: without TLS on loopback the caller is "local" with
// grpc.local_role.
func TestLoopbackPlaintext(t *testing.T) {
	e := etcdtest.Start(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		role    string
		applyOK bool
	}{{"admin", true}, {"viewer", false}} {
		svc := &Service{Store: e.Store(), Logger: log}
		cli := dialPlain(t, serve(t, config.GRPC{LocalRole: c.role}, svc, log))
		who, err := cli.WhoAmI(context.Background(), &pb.WhoAmIRequest{})
		if err != nil || who.GetIdentity() != "local" || who.GetRole() != c.role {
			t.Errorf("local role %s: whoami %v, %v", c.role, who, err)
		}
		_, err = cli.Drain(context.Background(), &pb.DrainRequest{Kind: "region", Name: "x"})
		if denied := status.Code(err) == codes.PermissionDenied; denied == c.applyOK {
			t.Errorf("local role %s: drain: %v", c.role, err)
		}
	}
	// No local role: a plaintext caller has none.
	cli := dialPlain(t, serve(t, config.GRPC{}, &Service{Store: e.Store(), Logger: log}, log))
	_, err := cli.Status(context.Background(), &pb.StatusRequest{})
	wantCode(t, "no local role", err, codes.PermissionDenied, "the local caller has the none role")
}

// TestRequestSizeLimit: a request over grpc.max_request_bytes is refused
// with ResourceExhausted by the transport, before it is decoded or reaches
// a handler, whoever sends it.
func TestRequestSizeLimit(t *testing.T) {
	p := newProvince(t, true)
	doc := bytes.Repeat([]byte("#"), 2<<20)
	_, err := p.client["otto"].ApplyTopology(context.Background(), &pb.ApplyTopologyRequest{Document: doc, DryRun: true})
	wantCode(t, "a 2 MiB apply with a 1 MiB limit", err, codes.ResourceExhausted, "larger than max")
	if strings.Contains(p.log.String(), "ApplyTopology") {
		t.Errorf("the oversized request reached the handler chain:\n%s", p.log.String())
	}
}

// TestDrillKeepsEveryRegionCovered: a drill that would leave a region
// without an announcing scheduler is refused with the reason, as is the
// same target twice; the rest go through. Real etcd, lab center.
func TestDrillKeepsEveryRegionCovered(t *testing.T) {
	ctx := context.Background()
	drill := func(p *province, target string) error {
		_, err := p.client["otto"].Drill(ctx, &pb.DrillRequest{Region: target, DurationSeconds: 30})
		return err
	}

	// syn-3 has no announcing scheduler of its own: the center is all it has.
	p := newProvince(t, true)
	register(t, p.st, center(true), city("syn-1", true), city("syn-2", true), city("syn-3", false))
	wantCode(t, "center while syn-3 has no scheduler", drill(p, "center"), codes.FailedPrecondition,
		"drilling center would leave a region without an announcing scheduler", "syn-3 (none of its own schedulers announces, and the center would be drilled)")
	if err := drill(p, "syn-1"); err != nil {
		t.Fatalf("syn-1, the center covering it: %v", err)
	}
	wantCode(t, "syn-1 twice", drill(p, "syn-1"), codes.FailedPrecondition, "a drill of syn-1 is already in force")
	wantCode(t, "center while syn-1 is drilled", drill(p, "center"), codes.FailedPrecondition, "syn-1 (its schedulers are drilled, and the center would be drilled)")

	// Every city has its own scheduler: the center may go, then no city.
	p = newProvince(t, true)
	register(t, p.st, center(true), city("syn-1", true), city("syn-2", true), city("syn-3", true))
	if err := drill(p, "center"); err != nil {
		t.Fatalf("center, every city covered by its own: %v", err)
	}
	wantCode(t, "syn-2 while the center is drilled", drill(p, "syn-2"), codes.FailedPrecondition,
		"drilling syn-2 would leave", "syn-2 (its schedulers would be drilled, and the center is drilled)")

	// The drill records in etcd: only the two that went through.
	drills, _, err := opstate.ListDrills(ctx, p.st.Client(), p.st.Prefix())
	if err != nil || len(drills) != 1 || !drills[0].Target.Center {
		t.Errorf("drills in force: %v, %v", drills, err)
	}
}

func TestDrillsChangedMeanwhile(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client()
	ctx := context.Background()
	_, rev, err := opstate.ListDrills(ctx, cli, e.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := opstate.StartDrill(ctx, cli, e.Prefix, nil, opstate.RegionTarget("a"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := opstate.StartDrillIf(ctx, cli, e.Prefix, nil, opstate.RegionTarget("b"), time.Minute, rev); err != opstate.ErrDrillsChanged {
		t.Errorf("a drill decided on a stale view was written: %v", err)
	}
}

// TestDrillRefusedWithoutRoutes: a drill of schedulers that announce
// nothing themselves (announce.mode none, the loopback province) would
// withdraw no route: it is refused up front with the reason, before the
// production switches; a region with one announcing scheduler is drilled.
func TestDrillRefusedWithoutRoutes(t *testing.T) {
	ctx := context.Background()
	modeNone := func(in store.Instance) store.Instance {
		in.AnnounceWhy, in.State = store.NotAnnouncedModeNone, "ready"
		return in
	}
	p := newProvince(t, false) // production, drills.allow_production off
	second := city("syn-2", true)
	second.ID = "syn-2-2"
	register(t, p.st, modeNone(center(false)), modeNone(city("syn-1", false)), modeNone(city("syn-2", false)), second, modeNone(city("syn-3", false)))
	drill := &pb.DrillRequest{Region: "syn-1", DurationSeconds: 30, ProductionConfirmed: true}
	_, err := p.client["ada"].Drill(ctx, drill)
	wantCode(t, "syn-1, mode none", err, codes.FailedPrecondition,
		"the schedulers of syn-1 announce nothing themselves (announce.mode none): a drill would withdraw no route; drill a province whose schedulers announce (bgp/ospf)")
	_, err = p.client["ada"].Drill(ctx, &pb.DrillRequest{Region: "center", DurationSeconds: 30})
	wantCode(t, "center, mode none", err, codes.FailedPrecondition, "the central schedulers announce nothing themselves (announce.mode none)")
	_, err = p.client["ada"].Drill(ctx, &pb.DrillRequest{Region: "syn-2", DurationSeconds: 30, ProductionConfirmed: true})
	wantCode(t, "syn-2, one scheduler announces", err, codes.FailedPrecondition, "drills.allow_production")

	p.svc.Lab = true
	resp, err := p.client["otto"].Drill(ctx, &pb.DrillRequest{Region: "syn-2", DurationSeconds: 30})
	if err != nil {
		t.Fatalf("syn-2 in a lab, one scheduler announcing: %v", err)
	}
	if got := resp.GetInstances(); len(got) != 2 {
		t.Errorf("drilled instances %v, want syn-2-1 and syn-2-2", got)
	}
	_, err = p.client["otto"].Drill(ctx, &pb.DrillRequest{Region: "syn-3", DurationSeconds: 30})
	wantCode(t, "syn-3 in a lab, mode none", err, codes.FailedPrecondition, "the schedulers of syn-3 announce nothing themselves")
	drills, _, err := opstate.ListDrills(ctx, p.st.Client(), p.st.Prefix())
	if err != nil || len(drills) != 1 || drills[0].Target != opstate.RegionTarget("syn-2") {
		t.Errorf("drills in force: %v, %v (only syn-2's)", drills, err)
	}
}
