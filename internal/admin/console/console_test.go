package console

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/admin/adminapi"
	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/security/pki"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newConsole(t *testing.T, readOnly bool) *Console {
	t.Helper()
	con, err := New(Config{Service: &adminapi.Service{Logger: quiet}, Gate: adminapi.NewGate(nil, quiet), ReadOnly: readOnly,
		Loopback: true, LocalRole: authz.Admin, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return con
}

// TestCaller: as the admin API's interceptor: the verified certificate's
// subject and role; "local" with the local role only from loopback on a
// loopback listener; nobody otherwise.
func TestCaller(t *testing.T) {
	op := &x509.Certificate{Subject: pkix.Name{CommonName: "otto"}, URIs: []*url.URL{{Scheme: "urn", Opaque: "anysched:role:operator"}}}
	tests := []struct {
		name     string
		remote   string
		tls      *tls.ConnectionState
		loopback bool
		want     authz.Caller
	}{
		{"certificate", "10.0.0.5:4000", &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{op}}}, false, authz.Caller{Identity: "otto", Role: authz.Operator, Peer: "10.0.0.5:4000"}},
		{"certificate beats local", "127.0.0.1:4000", &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{op}}}, true, authz.Caller{Identity: "otto", Role: authz.Operator, Peer: "127.0.0.1:4000"}},
		{"local", "127.0.0.1:4000", nil, true, authz.Caller{Identity: authz.Local, Role: authz.Viewer, Peer: "127.0.0.1:4000"}},
		{"local over IPv6", "[::1]:4000", nil, true, authz.Caller{Identity: authz.Local, Role: authz.Viewer, Peer: "[::1]:4000"}},
		{"loopback peer, listener beyond loopback", "127.0.0.1:4000", nil, false, authz.Caller{Peer: "127.0.0.1:4000"}},
		{"remote peer on a loopback listener", "10.0.0.5:4000", nil, true, authz.Caller{Peer: "10.0.0.5:4000"}},
		{"TLS without a verified certificate", "10.0.0.5:4000", &tls.ConnectionState{}, false, authz.Caller{Peer: "10.0.0.5:4000"}},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/console/", nil)
		r.RemoteAddr, r.TLS = tt.remote, tt.tls
		if got := Caller(r, tt.loopback, authz.Viewer, nil); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// TestCallerRoleFromTheOperatorsCA: the admin listener accepts both the
// operators' and the scrapers' CAs; a certificate of the scrapers' CA
// naming itself admin once was an admin on the console. With RoleCAs, only
// the operators' CA's certificates carry their role.
func TestCallerRoleFromTheOperatorsCA(t *testing.T) {
	leaf := func(ca *pki.CA, cn, role string) []*x509.Certificate {
		certPEM, _, err := ca.Issue(pki.Leaf{CN: cn, Role: role, Client: true})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := pem.Decode(certPEM)
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return []*x509.Certificate{c, ca.Cert}
	}
	admins, err := pki.NewCA("operators", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	scrapers, err := pki.NewCA("metrics", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	roleCAs := x509.NewCertPool()
	roleCAs.AddCert(admins.Cert)
	for _, tc := range []struct {
		name  string
		chain []*x509.Certificate
		cas   *x509.CertPool
		want  authz.Role
	}{
		{"operator of the operators' CA", leaf(admins, "otto", "operator"), roleCAs, authz.Operator},
		{"'admin' of the scrapers' CA", leaf(scrapers, "prometheus", "admin"), roleCAs, authz.None},
		{"no role CA: none at all", leaf(admins, "otto", "operator"), x509.NewCertPool(), authz.None},
		{"nil: as the listener verified", leaf(scrapers, "prometheus", "admin"), nil, authz.Admin},
	} {
		r := httptest.NewRequest("GET", "/console/", nil)
		r.RemoteAddr, r.TLS = "10.0.0.5:4000", &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{tc.chain}}
		if got := Caller(r, false, authz.Viewer, tc.cas); got.Role != tc.want || got.Identity != tc.chain[0].Subject.CommonName {
			t.Errorf("%s: %+v, want role %v", tc.name, got, tc.want)
		}
	}
}

// TestCSRF: a change needs the session's token for this identity, and no
// foreign Origin or cross-site fetch.
func TestCSRF(t *testing.T) {
	con := newConsole(t, false)
	local := authz.Caller{Identity: authz.Local, Role: authz.Admin}
	const session = "0123456789abcdef0123456789abcdef"
	good := con.csrfToken(session, local)
	tests := []struct {
		name                string
		origin, site, token string
		cookie              bool
		as                  authz.Caller
		wantErr             string
	}{
		{"form from the page", "http://localhost", "", good, true, local, ""},
		{"fetch from the page", "", "same-origin", good, true, local, ""},
		{"no origin headers (not a browser)", "", "", good, true, local, ""},
		{"other origin", "http://evil.test", "", good, true, local, "cross-origin"},
		{"cross-site fetch", "", "cross-site", good, true, local, "cross-site"},
		{"no session", "http://localhost", "", good, false, local, "no console session"},
		{"no token", "http://localhost", "", "", true, local, "token"},
		{"another identity's token", "http://localhost", "", good, true, authz.Caller{Identity: "otto", Role: authz.Operator}, "token"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("POST", "http://localhost/console/api/drain", strings.NewReader(url.Values{"csrf": {tt.token}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if tt.origin != "" {
			r.Header.Set("Origin", tt.origin)
		}
		if tt.site != "" {
			r.Header.Set("Sec-Fetch-Site", tt.site)
		}
		if tt.cookie {
			r.AddCookie(&http.Cookie{Name: sessionCookie, Value: session})
		}
		err := con.checkCSRF(r, tt.as)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: %v, want an error with %q", tt.name, err, tt.wantErr)
		}
	}
}

// TestWritesRefused: nobody, a request without the token, and any change
// on a read-only console are refused before the admin service is called
// (its store is nil here: a call would panic).
func TestWritesRefused(t *testing.T) {
	for _, tt := range []struct {
		name     string
		readOnly bool
		remote   string
		token    bool
		want     int
		msg      string
	}{
		{"nobody", false, "10.0.0.5:4000", true, http.StatusUnauthorized, "no verified client certificate"},
		{"no token", false, "127.0.0.1:4000", false, http.StatusForbidden, "token"},
		{"read-only console", true, "127.0.0.1:4000", true, http.StatusForbidden, "read-only"},
	} {
		con := newConsole(t, tt.readOnly)
		h := con.Handler()
		// A page first: the session cookie and the token.
		get := httptest.NewRequest("GET", "http://localhost/console/api/whoami", nil)
		get.RemoteAddr = "127.0.0.1:4000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, get)
		session := con.session(httptest.NewRecorder(), get)
		form := url.Values{"kind": {"region"}, "name": {"hefei"}}
		if tt.token {
			form.Set("csrf", con.csrfToken(session, authz.Caller{Identity: authz.Local}))
		}
		r := httptest.NewRequest("POST", "http://localhost/console/api/drain", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Origin", "http://localhost")
		r.AddCookie(&http.Cookie{Name: sessionCookie, Value: session})
		r.RemoteAddr = tt.remote
		w = httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.want || !strings.Contains(w.Body.String(), tt.msg) {
			t.Errorf("%s: %d %s, want %d with %q", tt.name, w.Code, w.Body, tt.want, tt.msg)
		}
	}
}

// TestMay: the console offers what the admin API's role table allows, and
// nothing but reads when read-only.
func TestMay(t *testing.T) {
	rw, ro := newConsole(t, false), newConsole(t, true)
	for _, tt := range []struct {
		role           authz.Role
		method         string
		want, wantRead bool
	}{
		{authz.Viewer, pb.Admin_Status_FullMethodName, true, true},
		{authz.Viewer, pb.Admin_Drain_FullMethodName, false, false},
		{authz.Operator, pb.Admin_Drain_FullMethodName, true, false},
		{authz.Operator, pb.Admin_Drill_FullMethodName, true, false},
		{authz.Operator, pb.Admin_Rollback_FullMethodName, false, false},
		{authz.Admin, pb.Admin_Rollback_FullMethodName, true, false},
	} {
		c := authz.Caller{Identity: "x", Role: tt.role}
		if got := rw.may(c, tt.method); got != tt.want {
			t.Errorf("%s %s: %t, want %t", tt.role, tt.method, got, tt.want)
		}
		if got := ro.may(c, tt.method); got != tt.wantRead {
			t.Errorf("read-only, %s %s: %t, want %t", tt.role, tt.method, got, tt.wantRead)
		}
	}
}

func TestHTTPCode(t *testing.T) {
	for c, want := range map[codes.Code]int{
		codes.PermissionDenied: 403, codes.Unauthenticated: 401, codes.InvalidArgument: 400, codes.NotFound: 404,
		codes.FailedPrecondition: 409, codes.Aborted: 409, codes.Unavailable: 503, codes.Internal: 500,
	} {
		if got := httpCode(status.Error(c, "x")); got != want {
			t.Errorf("%s: %d, want %d", c, got, want)
		}
	}
}

// TestRouteState: how a city's STBs are routed, from its instances and
// the drills in force.
func TestRouteState(t *testing.T) {
	until := time.Now().Add(time.Minute)
	for _, tt := range []struct {
		name    string
		ins     []Sched
		drilled bool
		want    string
	}{
		{"no scheduler", nil, false, "center"},
		{"announced", []Sched{{ID: "a", Announced: true}}, false, "announced"},
		{"one of two announces", []Sched{{ID: "a", Why: "not ready"}, {ID: "b", Announced: true}}, false, "announced"},
		{"mode none, ready", []Sched{{ID: "a", Why: "announce.mode none", State: "ready"}}, false, "routed"},
		{"mode none, stale", []Sched{{ID: "a", Why: "announce.mode none", State: "stale"}}, false, "withdrawn"},
		{"withdrawn", []Sched{{ID: "a", Why: "not ready: no snapshot"}}, false, "withdrawn"},
		{"drilled", []Sched{{ID: "a", Why: "withdrawn by a failover drill"}}, true, "drilled"},
	} {
		cy := &City{Name: "hefei", Instances: tt.ins}
		drills := map[string]time.Time{}
		if tt.drilled {
			drills["hefei"] = until
		}
		routeState(cy, drills)
		if cy.Route != tt.want || cy.RouteWhy == "" {
			t.Errorf("%s: %s (%s), want %s", tt.name, cy.Route, cy.RouteWhy, tt.want)
		}
	}
}

func TestVerdict(t *testing.T) {
	for _, tt := range []struct {
		available, healthy, drained, measured bool
		why, want                             string
	}{
		{true, true, false, true, "", "available"},
		{true, true, false, false, "", "unchecked"},
		{false, false, false, true, "probe timeout", "unhealthy"},
		{false, true, true, true, "drained: maintenance", "drained"},
		{false, true, false, true, "ejected: 5 consecutive failures", "ejected"},
		{false, true, false, true, "its node is over", "unavailable"},
	} {
		if got := verdict(tt.available, tt.healthy, tt.drained, tt.measured, tt.why); got != tt.want {
			t.Errorf("%+v: %s", tt, got)
		}
	}
}

// TestPagesParse: every page's template parses and the assets are embedded.
func TestPagesParse(t *testing.T) {
	p, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.t) != len(pageNames) {
		t.Errorf("%d templates for %d pages", len(p.t), len(pageNames))
	}
	h := newConsole(t, false).Handler()
	for _, f := range []string{"static/console.js", "static/console.css"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "http://localhost"+Prefix+f, nil))
		if w.Code != 200 || w.Body.Len() < 1000 || w.Header().Get("Content-Security-Policy") == "" {
			t.Errorf("%s: %d, %d bytes, CSP %q", f, w.Code, w.Body.Len(), w.Header().Get("Content-Security-Policy"))
		}
	}
}

// DNS rebinding: a page whose name now resolves to 127.0.0.1 reaches a
// loopback console with its own name in Host (and a matching Origin). A
// plaintext request is answered only when Host names loopback; over TLS
// (beyond loopback, client certificates) Host is not the guard.
func TestRebindingRefused(t *testing.T) {
	h := newConsole(t, false).Handler()
	for _, tt := range []struct {
		host string
		tls  bool
		want int
	}{
		{"localhost:9100", false, http.StatusOK},
		{"LOCALHOST", false, http.StatusOK},
		{"127.0.0.1:9100", false, http.StatusOK},
		{"127.8.9.10", false, http.StatusOK},
		{"[::1]:9100", false, http.StatusOK},
		{"rebind.attacker.example:9100", false, http.StatusMisdirectedRequest},
		{"10.0.0.1:9100", false, http.StatusMisdirectedRequest},
		{"localhost.attacker.example", false, http.StatusMisdirectedRequest},
		{"", false, http.StatusMisdirectedRequest},
		{"center.example:9100", true, http.StatusOK},
	} {
		for _, req := range []*http.Request{
			httptest.NewRequest(http.MethodGet, "http://x"+Prefix+"api/whoami", nil),
			httptest.NewRequest(http.MethodPost, "http://x"+Prefix+"api/drain", strings.NewReader("server=a")),
		} {
			req.Host, req.RemoteAddr = tt.host, "127.0.0.1:40000"
			if tt.tls {
				req.TLS = &tls.ConnectionState{}
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if refused := rec.Code == http.StatusMisdirectedRequest; refused != (tt.want == http.StatusMisdirectedRequest) {
				t.Errorf("%s %q (tls %v): %d %s", req.Method, tt.host, tt.tls, rec.Code, rec.Body.String())
			}
		}
	}
}
