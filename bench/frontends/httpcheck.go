package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/stb/steer"
)

// verifyHTTP checks every server before the runs: anysched answers 302,
// locates every STB address in its coverage zone (result CZ) and sends it
// to an edge address of the run's family (a server's address, or over
// IPv6 its address6, bracketed in the URL); nginx
// and the bare server answer 302 with their fixed Location; the HTTPS
// servers do so with the harness's certificate.
func verifyHTTP(ctx context.Context, hs httpSides, l *lab, clients []netip.Addr, path string) (checks, tlsChecks []string, err error) {
	plain := &http.Client{Timeout: 5 * time.Second, CheckRedirect: noRedirect}
	defer plain.CloseIdleConnections()
	roots := x509.NewCertPool()
	roots.AddCert(l.cert)
	secure := &http.Client{Timeout: 5 * time.Second, CheckRedirect: noRedirect,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	defer secure.CloseIdleConnections()

	servers := map[string]bool{}
	for _, a := range []*anyschedProc{hs.any1, hs.any2} {
		if a == nil {
			continue
		}
		for _, c := range clients {
			if err := checkAnysched(ctx, plain, "http://"+a.info.HTTP+path, c, servers, l.edges); err != nil {
				return nil, nil, err
			}
		}
		if a.info.HTTPS != "" {
			if err := checkAnysched(ctx, secure, "https://"+a.info.HTTPS+path, clients[0], servers, l.edges); err != nil {
				return nil, nil, fmt.Errorf("https: %w", err)
			}
		}
	}
	checks = []string{fmt.Sprintf("anysched answered 302 and located all %d STB addresses (%s) in their zones (CZ), sending them to %d distinct servers, each at %s",
		len(clients), l.fam.label(), len(servers), l.edges.what())}
	var fixed []string
	wantNginx := strings.ReplaceAll(l.fam.nginxLocation(), "$request_uri", path)
	if hs.nginx != nil {
		for _, u := range []string{hs.nginx.url(hs.nginx.plain, "http", path), hs.nginx.url(hs.nginx.logged, "http", path)} {
			if err := checkFixed(ctx, plain, u, wantNginx); err != nil {
				return nil, nil, fmt.Errorf("nginx: %w", err)
			}
		}
		if err := checkFixed(ctx, secure, hs.nginx.url(hs.nginx.tls, "https", path), wantNginx); err != nil {
			return nil, nil, fmt.Errorf("nginx TLS: %w", err)
		}
		fixed = append(fixed, "nginx (Location "+wantNginx+")")
	}
	if hs.bare != nil {
		if err := checkFixed(ctx, plain, "http://"+hs.bare.ready+path, l.fam.bareLocation()); err != nil {
			return nil, nil, fmt.Errorf("bare net/http: %w", err)
		}
		fixed = append(fixed, "bare net/http (Location "+l.fam.bareLocation()+")")
	}
	if len(fixed) > 0 {
		checks = append(checks, "302 with a fixed Location from "+strings.Join(fixed, " and "))
	}
	if hs.any1 != nil && hs.any1.info.HTTPS != "" {
		tlsChecks = append(tlsChecks, "anysched answered 302 over TLS")
	}
	if hs.nginx != nil {
		tlsChecks = append(tlsChecks, "nginx answered 302 over TLS")
	}
	var resumes []string
	for _, s := range []struct{ name, url string }{
		{"anysched", "https://" + addrOf(hs.any1, func(i anyschedInfo) string { return i.HTTPS }) + path},
		{"nginx", "https://" + nginxAddr(hs.nginx, func(n *nginxPeer) int { return n.tls }) + path},
	} {
		if strings.HasPrefix(s.url, "https:///") {
			continue // not running
		}
		ok, err := resumesTLS(ctx, s.url, roots)
		if err != nil {
			return nil, nil, fmt.Errorf("%s TLS session check: %w", s.name, err)
		}
		resumes = append(resumes, fmt.Sprintf("%s %s", s.name, map[bool]string{true: "yes", false: "no"}[ok]))
	}
	if len(resumes) > 0 {
		tlsChecks = append(tlsChecks, "TLS session resumption offered, to a TLS 1.2 client: "+strings.Join(resumes, ", "))
	}
	return checks, tlsChecks, nil
}

// nginxAddr is host:port of one of n's ports, "" when n is nil.
func nginxAddr(n *nginxPeer, port func(*nginxPeer) int) string {
	if n == nil {
		return ""
	}
	return n.fam.hostPort(port(n))
}

// edgeSet is what anysched may answer with: the edge addresses of the
// family's servers in the province it serves.
type edgeSet struct {
	fam   family
	addrs map[netip.Addr]bool
}

func newEdgeSet(f family) edgeSet { return edgeSet{fam: f, addrs: serverAddrs(f)} }

// what says what the addresses are, for the report.
func (e edgeSet) what() string {
	if e.fam.v6 {
		return "a server's IPv6 address (address6)"
	}
	return "a server's IPv4 address"
}

// check fails unless host (a URL's, or a DNS record's address) is one of
// the set, of the family; an IPv6 host of a URL must be bracketed.
func (e edgeSet) check(host string) error {
	if e.fam.v6 && !strings.HasPrefix(host, "[") {
		return fmt.Errorf("%q is not a bracketed IPv6 address", host)
	}
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if hp, err := netip.ParseAddrPort(host); err == nil {
		h = hp.Addr().String()
	}
	a, err := netip.ParseAddr(h)
	if err != nil {
		return fmt.Errorf("%q is not an address", host)
	}
	if !e.fam.of(a) {
		return fmt.Errorf("%s is not an %s address", a, e.fam.label())
	}
	if !e.addrs[a] {
		return fmt.Errorf("%s is not %s in the province", a, e.what())
	}
	return nil
}

// resumesTLS connects twice to u, a new connection each time, and reports
// whether the second resumed the first's TLS session.
func resumesTLS(ctx context.Context, u string, roots *x509.CertPool) (bool, error) {
	tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{
		RootCAs: roots, MaxVersion: tls.VersionTLS12, ClientSessionCache: tls.NewLRUClientSessionCache(4),
	}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Timeout: 5 * time.Second, CheckRedirect: noRedirect, Transport: tr}
	var resumed bool
	for range 2 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return false, err
		}
		req.Host = topogen.Hostname
		resp, err := c.Do(req)
		if err != nil {
			return false, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		resumed = resp.TLS != nil && resp.TLS.DidResume
	}
	return resumed, nil
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func get(ctx context.Context, c *http.Client, u, xff string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Host = topogen.Hostname
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
		req.Header.Set("X-Anysched-Debug", "1") // the check reads the result type
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// checkAnysched asks anysched at u for STB client, checks the Location's
// host is one of edges, and adds it to servers.
func checkAnysched(ctx context.Context, c *http.Client, u string, client netip.Addr, servers map[string]bool, edges edgeSet) error {
	resp, err := get(ctx, c, u, client.String())
	if err != nil {
		return fmt.Errorf("anysched sample request: %w", err)
	}
	res := resp.Header.Get("X-Anysched-Result")
	if resp.StatusCode != http.StatusFound || res != steer.ResultCZ.String() {
		return fmt.Errorf("anysched answered STB %s with %d, result %q; want 302 and CZ", client, resp.StatusCode, res)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Host == "" {
		return fmt.Errorf("anysched answered STB %s with Location %q", client, resp.Header.Get("Location"))
	}
	if err := edges.check(loc.Host); err != nil {
		return fmt.Errorf("anysched answered STB %s with Location %q: %w", client, resp.Header.Get("Location"), err)
	}
	servers[loc.Host] = true
	return nil
}

// checkFixed asks a fixed-answer server at u and wants a 302 to want.
func checkFixed(ctx context.Context, c *http.Client, u, want string) error {
	resp, err := get(ctx, c, u, "")
	if err != nil {
		return fmt.Errorf("sample request: %w", err)
	}
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != want {
		return fmt.Errorf("%s answered %d Location %q; want 302 to %s", u, resp.StatusCode, resp.Header.Get("Location"), want)
	}
	return nil
}
