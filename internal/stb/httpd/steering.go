package httpd

import (
	"net/http"
	"net/netip"
	"time"

	"github.com/anysched/anysched/internal/stb/accesslog"
	"github.com/anysched/anysched/internal/stb/pathway"
	"github.com/anysched/anysched/internal/stb/steer"
)

// Steerer answers content steering manifests (internal/stb/pathway).
type Steerer interface {
	Answer(dst []byte, eng *steer.Engine, d *steer.Decision, req steer.Request, q pathway.Query, now time.Time) ([]byte, pathway.Result)
	Refused()
}

// Bodies of the steering path's refusals.
const (
	bodySteeringOff  = "content steering is not served here\n"
	bodySteeringPath = "steering path names no playback path\n"
	bodySteeringSvc  = "service has no content steering\n"
)

// isSteering reports whether path asks for a steering manifest.
func isSteering(path string) bool {
	const p = pathway.Prefix
	return len(path) >= len(p) && path[:len(p)] == p && (len(path) == len(p) || path[len(p)] == '/')
}

// steering answers a steering manifest request into a: the decision for
// the playback path after the prefix (the one a new request would get,
// not counted as one), refined by the allocator as a redirect's is, then
// the manifest of where the player should be.
func (s *Server) steering(r *stbRequest, a *answer, scratch []byte, start time.Time, client netip.Addr, path string) []byte {
	head := r.method == http.MethodHead
	// Browser players fetch the manifest from their page's origin: a
	// manifest (per player, no credential of the browser's) may be read
	// by any, and so may its refusals, whose status a player acts on.
	a.cors = true
	st := s.cfg.Steering
	if st == nil {
		return textAnswer(a, head, http.StatusNotFound, bodySteeringOff, scratch)
	}
	play := path[len(pathway.Prefix):]
	if len(play) < 2 || play[0] != '/' {
		st.Refused()
		return textAnswer(a, head, http.StatusBadRequest, bodySteeringPath, scratch)
	}
	q, bad := pathway.ParseQuery(r.query)
	if bad != "" {
		st.Refused()
		a.status, a.ctype, a.noSniff = http.StatusBadRequest, ctypeText, true
		if !head {
			scratch = append(append(scratch[:0], bad...), '\n')
			a.body = scratch
		}
		return scratch
	}
	a.record = true
	a.entry = accesslog.Entry{Time: start, Proto: "http", Client: client, Host: r.host, Path: path}
	done := func(status int, body string) []byte {
		a.entry.Latency, a.entry.Status = time.Since(start), status
		scratch = textAnswer(a, head, status, body, scratch)
		a.retry = status == http.StatusServiceUnavailable
		return scratch
	}
	eng := s.engine()
	if eng == nil {
		a.entry.Result = steer.ResultError
		return done(http.StatusServiceUnavailable, bodyNoSnap+"\n")
	}
	req := steer.Request{Client: client, Host: r.host, Path: play, Query: r.query, Now: start, Family: steer.FamilyOf(client)}
	a.entry.Family = req.Family
	d := eng.Peek(req)
	a.entry.Result = d.Result
	if d.Result == steer.ResultMiss {
		return done(http.StatusNotFound, bodyMiss)
	}
	if eng.Snapshot().Services[d.Service].Steering == nil {
		return done(http.StatusNotFound, bodySteeringSvc)
	}
	if s.cfg.Allocator != nil {
		dp := new(steer.Decision)
		*dp = d
		err := s.cfg.Allocator.Allocate(eng, dp, req, viewerToken(r))
		d = *dp
		if err != nil {
			a.entry.Result = d.Result
			return done(http.StatusForbidden, err.Error()+"\n")
		}
	}
	buf, res := st.Answer(scratch[:0], eng, &d, req, q, start)
	a.status, a.ctype = http.StatusOK, ctypeJSON
	if !head {
		a.body = buf
	}
	e := &a.entry
	e.Latency, e.Result, e.Status = time.Since(start), d.Result, http.StatusOK
	ad := d
	ad.Server, ad.Node, ad.Region = -1, -1, -1
	snap := eng.Snapshot()
	if res.To >= 0 {
		sv := &snap.Servers[res.To]
		ad.Server, ad.Node, ad.Region = res.To, sv.Node, sv.Region
	}
	names := eng.Names(&ad)
	setNames(e, &names)
	if ad.Server >= 0 {
		_, _, e.TargetFamily, _ = eng.Addr(&ad)
	}
	e.Steering = res.Outcome.String()
	if res.From >= 0 {
		e.From = snap.Servers[res.From].Name
	}
	return buf
}

// textAnswer makes a a plain-text answer (no body for HEAD), rendered
// into scratch.
func textAnswer(a *answer, head bool, status int, body string, scratch []byte) []byte {
	a.status, a.ctype, a.noSniff = status, ctypeText, true
	if !head {
		scratch = append(scratch[:0], body...)
		a.body = scratch
	}
	return scratch
}
