package httpd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/stb/steer"
)

// Header values shared by every net/http response. net/http never modifies
// a header's value slice in place, and len == cap, so an append by a
// middleware copies instead of writing into these; sharing them saves an
// allocation per header per request.
var (
	hdrNoStore  = []string{"no-store"}
	hdrAllow    = []string{"GET, HEAD"}
	hdrText     = []string{"text/plain; charset=utf-8"}
	hdrJSON     = []string{"application/json"}
	hdrRetry    = []string{retryAfter}
	hdrNoSniff  = []string{"nosniff"}
	hdrClose    = []string{"close"}
	hdrCORS     = []string{"*"}
	instanceKey = "X-Anysched-Instance"
)

// resultHeader holds the X-Anysched-Result values, allocated once.
var resultHeader = func() map[steer.Result][]string {
	m := map[steer.Result][]string{}
	for _, r := range steer.Results {
		m[r] = []string{r.String()}
	}
	return m
}()

// bufPool holds the buffers redirect URLs and bodies are rendered into.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// ServeHTTP answers one STB request: the net/http adapter of the handler
// core (the Handler for net/http listeners, TLS included).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sr := stbRequest{
		method: r.Method, host: r.Host, peer: parseHostPort(r.RemoteAddr),
		xff: r.Header["X-Forwarded-For"], accept: r.Header["Accept"],
		hasBody: r.ContentLength != 0,
	}
	if v := r.Header["Authorization"]; len(v) > 0 {
		sr.auth = v[0]
	}
	_, sr.debug = r.Header[DebugHeader]
	if r.URL == nil {
		sr.noURL = true
	} else {
		sr.uriLen = max(len(r.RequestURI), len(r.URL.Path))
		sr.path = r.URL.EscapedPath()
		sr.query = r.URL.RawQuery
	}
	bp := bufPool.Get().(*[]byte)
	var a answer
	buf := s.decide(&sr, &a, (*bp)[:0], start)
	s.writeNetHTTP(w, &a)
	if cap(buf) <= 64<<10 {
		*bp = buf[:0]
		bufPool.Put(bp)
	}
	s.finish(&a)
}

// writeNetHTTP writes a through net/http (which adds Date, Content-Length
// and Connection itself).
func (s *Server) writeNetHTTP(w http.ResponseWriter, a *answer) {
	h := w.Header()
	h[instanceKey] = s.instance
	h["Cache-Control"] = hdrNoStore
	if a.allow {
		h["Allow"] = hdrAllow
	}
	if a.cors {
		h["Access-Control-Allow-Origin"] = hdrCORS
	}
	if a.retry {
		h["Retry-After"] = hdrRetry
	}
	switch a.ctype {
	case ctypeText:
		h["Content-Type"] = hdrText
	case ctypeJSON:
		h["Content-Type"] = hdrJSON
	}
	if a.noSniff {
		h["X-Content-Type-Options"] = hdrNoSniff
	}
	if a.close {
		h["Connection"] = hdrClose
	}
	if a.status == http.StatusFound {
		h["Location"] = []string{string(a.location)}
		if a.alternates != nil {
			h[AlternatesHeader] = []string{string(a.alternates)}
		}
	}
	// Off by default: every header costs net/http a map insert, a sort
	// and a write.
	if a.debug {
		h["X-Anysched-Result"] = resultHeader[a.result]
		if a.hasRate {
			h["X-Anysched-Bitrate"] = []string{strconv.Itoa(a.bitrate)}
		}
		h["Server-Timing"] = []string{string(appendTiming(nil, a.decision))}
	}
	w.WriteHeader(a.status)
	if len(a.body) > 0 {
		_, _ = w.Write(a.body)
	}
}

// appendTiming appends the Server-Timing value of a decision time.
func appendTiming(b []byte, d time.Duration) []byte {
	return strconv.AppendFloat(append(b, "decide;dur="...), float64(d.Nanoseconds())/1e6, 'f', 3, 64)
}

// newHTTPServer is the net/http server of the STB handler, with the
// configured limits.
func (s *Server) newHTTPServer() *http.Server {
	return &http.Server{
		Handler:           s,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		MaxHeaderBytes:    s.cfg.MaxHeaderBytes,
		// "OPTIONS *" comes to the handler (405) instead of net/http's 200.
		DisableGeneralOptionsHandler: true,
		ErrorLog:                     slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// ServeTLS serves HTTPS on ln (TCP) with cfg, on net/http (the fast path
// speaks plain HTTP only), with the same answers as Serve and under the
// same connection cap.
func (s *Server) ServeTLS(ctx context.Context, ln net.Listener, cfg *tls.Config) error {
	return s.serveNetHTTP(ctx, tls.NewListener(ln, cfg), "https")
}

// serveNetHTTP is Serve on net/http; scheme names the listener in the log.
func (s *Server) serveNetHTTP(ctx context.Context, ln net.Listener, scheme string) error {
	srv := s.newHTTPServer()
	ln = s.conns.Listener(ln)
	s.setAddr(ln.Addr())
	defer s.setAddr(nil)
	s.log.Info(scheme+" listener up", "addr", ln.Addr().String(), "instance", s.cfg.InstanceID, "server", ServerNetHTTP)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http listener: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		s.log.Warn("graceful stop timed out; closing remaining connections", "err", err)
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http listener: %w", err)
	}
	s.log.Info("http listener stopped")
	return nil
}
