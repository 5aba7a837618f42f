// Package console is the operator console: a few server-rendered pages on
// a scheduler's admin listener (the province, live answer rates, health and
// drains, failover drills, QoE plans and topology history), redrawn by a
// little JavaScript that polls the console's JSON endpoints.
//
// The console is not a second admin API. Every page and endpoint names the
// admin RPC it stands for; the caller is authenticated as the gRPC server
// authenticates it (a verified client certificate, or "local" on a loopback
// listener), authorized by the admin API's own role table
// (adminapi.Authorize) and the RPC is called in process through
// adminapi.Gate, which logs and audits it exactly as a gRPC call. A
// regional scheduler serves it read-only: it has no admin API of its own.
package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/admin/adminapi"
	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Prefix is where the console is mounted on the admin listener.
const Prefix = "/console/"

// Config is what a console serves from.
type Config struct {
	// Service is the admin service, called in process; Gate runs each call
	// through the role table, the log and the audit trail.
	Service *adminapi.Service
	Gate    *adminapi.Gate
	// ReadOnly refuses every change whatever the caller's role (a regional
	// scheduler's console).
	ReadOnly bool
	// Loopback: the admin listener is on loopback, so a caller without a
	// client certificate from a loopback address is "local" with LocalRole.
	Loopback  bool
	LocalRole authz.Role
	// RoleCAs, if set, are the CAs whose client certificates carry a role
	// here (the admin API's client CA): the admin listener also accepts
	// certificates of the CA that signs scrapers' certificates, and those
	// are nobody on the console. Nil: every certificate the listener
	// verified carries its role.
	RoleCAs *x509.CertPool
	// Gatherer is this scheduler's registry: the console charts its own
	// answers by result type (anysched_requests_total). Nil: not shown.
	Gatherer prometheus.Gatherer
	// Scheduler names this scheduler in the header ("central center-1").
	Scheduler string
	Logger    *slog.Logger
}

// Console serves the pages; it is safe for concurrent use.
type Console struct {
	c       Config
	csrfKey []byte
	pages   *pages
	drills  *drills
	qoe     *qoeHistory // each region's QoE lately, for the QoE page

	regionsMu  sync.Mutex
	regionsRev int64
	regions    []regionPlace
	rights     []serviceRules // read with regions
}

// New builds a console.
func New(c Config) (*Console, error) {
	if c.Service == nil || c.Gate == nil || c.Logger == nil {
		return nil, errors.New("console: Service, Gate and Logger are required")
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("console: csrf key: %w", err)
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	con := &Console{c: c, csrfKey: key, pages: p, qoe: newQoEHistory(qoeEvery, qoeWindow)}
	con.drills = newDrills(con)
	return con, nil
}

// Run follows the drills the console has seen until ctx ends.
func (con *Console) Run(ctx context.Context) error {
	con.drills.run(ctx)
	return nil
}

// Handler serves everything under Prefix.
func (con *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, p := range []string{"", "rates", "health", "drills", "qoe"} {
		mux.HandleFunc("GET "+Prefix+p, con.page(p))
	}
	mux.Handle("GET "+Prefix+"static/", http.StripPrefix(Prefix, http.FileServerFS(staticFS)))
	mux.HandleFunc("GET "+Prefix+"api/whoami", con.apiWhoAmI)
	mux.HandleFunc("GET "+Prefix+"api/province", con.apiProvince)
	mux.HandleFunc("GET "+Prefix+"api/health", con.apiHealth)
	mux.HandleFunc("GET "+Prefix+"api/drills", con.apiDrills)
	mux.HandleFunc("GET "+Prefix+"api/history", con.apiHistory)
	mux.HandleFunc("GET "+Prefix+"api/diff", con.apiDiff)
	mux.HandleFunc("GET "+Prefix+"api/failures", con.apiFailures)
	mux.HandleFunc("POST "+Prefix+"api/drain", con.write(con.postDrain))
	mux.HandleFunc("POST "+Prefix+"api/undrain", con.write(con.postUndrain))
	mux.HandleFunc("POST "+Prefix+"api/drill", con.write(con.postDrill))
	return loopbackNamed(headers(mux))
}

// loopbackNamed refuses a plaintext request (a loopback listener's: beyond
// loopback the admin listener demands TLS) that does not name a loopback
// host: a page that rebinds its own name to 127.0.0.1 sends its name in
// Host, and the origin check alone trusts whatever Host says.
func loopbackNamed(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil && !loopbackHost(r.Host) {
			http.Error(w, fmt.Sprintf("the console answers on a loopback listener only to requests for localhost or a loopback address, not %q", r.Host), http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names loopback: localhost or
// a loopback address, with or without a port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// headers sets what every answer carries: no framing, no sniffing, no
// script but the console's own, and nothing cached (the pages are live).
func headers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// Caller says who made r, as the admin API's interceptor would: the
// subject of a verified client certificate, or "local" with localRole for
// a loopback caller without one on a loopback listener; nobody otherwise.
func Caller(r *http.Request, loopback bool, localRole authz.Role, roleCAs *x509.CertPool) authz.Caller {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		chain := r.TLS.VerifiedChains[0]
		c := authz.FromCertificate(chain[0], r.RemoteAddr)
		if roleCAs != nil && !chainsTo(chain, roleCAs) {
			c.Role = authz.None
		}
		return c
	}
	if loopback && loopbackAddr(r.RemoteAddr) {
		return authz.Caller{Identity: authz.Local, Role: localRole, Peer: r.RemoteAddr}
	}
	return authz.Caller{Peer: r.RemoteAddr}
}

// chainsTo reports whether a verified chain's leaf also chains to one of
// roots, as a client certificate.
func chainsTo(chain []*x509.Certificate, roots *x509.CertPool) bool {
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}

func loopbackAddr(a string) bool {
	ap, err := netip.ParseAddrPort(a)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

func (con *Console) caller(r *http.Request) authz.Caller {
	return Caller(r, con.c.Loopback, con.c.LocalRole, con.c.RoleCAs)
}

// call runs one admin RPC for the caller through the gate.
func (con *Console) call(ctx context.Context, c authz.Caller, method string, do func(context.Context) error) error {
	return con.c.Gate.Call(ctx, c, method, do)
}

// may reports whether c may call method from this console.
func (con *Console) may(c authz.Caller, method string) bool {
	if con.c.ReadOnly && !adminapi.ReadOnlyMethod(method) {
		return false
	}
	return adminapi.Authorize(c, method) == nil
}

// sessionCookie names the console session: it binds the CSRF token.
const sessionCookie = "anysched-console"

// session returns the request's session id, setting a new one when it has
// none (GET pages only).
func (con *Console) session(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(sessionCookie); err == nil && len(ck.Value) == 32 {
		return ck.Value
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	// Secure whenever the console is served over TLS; a plain listener is
	// loopback only (the admin listener refuses anything else without TLS).
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: Prefix, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode}) //nolint:gosec // G124: see above
	return id
}

// csrfToken binds a session to the caller's identity: a token taken from
// one certificate's session is worth nothing to another.
func (con *Console) csrfToken(session string, c authz.Caller) string {
	m := hmac.New(sha256.New, con.csrfKey)
	m.Write([]byte(session))
	m.Write([]byte{0})
	m.Write([]byte(c.Identity))
	return hex.EncodeToString(m.Sum(nil))
}

// checkCSRF refuses a change that did not come from a console page of
// this origin: the Origin (or Sec-Fetch-Site) must be this listener's, and
// the token must be the session's.
func (con *Console) checkCSRF(r *http.Request, c authz.Caller) error {
	if o := r.Header.Get("Origin"); o != "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		if o != scheme+"://"+r.Host {
			return fmt.Errorf("cross-origin request from %s refused", o)
		}
	} else if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
		return fmt.Errorf("cross-site request (%s) refused", s)
	}
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return errors.New("no console session: reload the page")
	}
	tok := r.Header.Get("X-CSRF-Token")
	if tok == "" {
		tok = r.PostFormValue("csrf")
	}
	want := con.csrfToken(ck.Value, c)
	if subtle.ConstantTimeCompare([]byte(tok), []byte(want)) != 1 {
		return errors.New("missing or stale console token: reload the page")
	}
	return nil
}

// write wraps a change: an authenticated caller, a same-origin request
// with the session's token, and a console that may change things.
func (con *Console) write(h func(http.ResponseWriter, *http.Request, authz.Caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		c := con.caller(r)
		if c.Identity == "" {
			fail(w, r, status.Error(codes.Unauthenticated, "no verified client certificate"))
			return
		}
		if err := con.checkCSRF(r, c); err != nil {
			fail(w, r, status.Error(codes.PermissionDenied, err.Error()))
			return
		}
		if con.c.ReadOnly {
			fail(w, r, status.Error(codes.PermissionDenied, "this console is read-only (a regional scheduler's): make changes on the center's"))
			return
		}
		h(w, r, c)
	}
}

// httpCode maps an admin API error to HTTP.
func httpCode(err error) int {
	switch status.Code(err) {
	case codes.OK:
		return http.StatusOK
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.InvalidArgument:
		return http.StatusBadRequest
	case codes.NotFound:
		return http.StatusNotFound
	case codes.FailedPrecondition, codes.Aborted, codes.AlreadyExists:
		return http.StatusConflict
	case codes.Unavailable, codes.DeadlineExceeded:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// fail answers an error as JSON ({"error": ..., "code": ...}).
func fail(w http.ResponseWriter, _ *http.Request, err error) {
	st := status.Convert(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpCode(err))
	_ = json.NewEncoder(w).Encode(apiError{Error: st.Message(), Code: st.Code().String()})
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// serrMessage is an admin API error's message, without its code.
func serrMessage(err error) string { return status.Convert(err).Message() }

// ms is a duration's milliseconds for JSON.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
