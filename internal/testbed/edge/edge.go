// Package edge is a small media edge for the lab: it serves synthetic HLS
// that real players play (a live media playlist per channel and bitrate
// whose window follows the wall clock, a VOD one per title; MPEG-TS
// segments of one second of tiny H.264, all SegmentBytes long), answers
// health probes, and reports its load as the JSON stats body the health
// checkers understand ({"cpu", "bandwidth_mbps", "connections"}). It also
// writes what an nginx edge needs to serve the same media (nginx.go).
//
// For drills of failures the probes do not see, a fail file (Server.FailFile)
// breaks the media path alone: while the file exists every playlist and
// segment request is answered 500, and /health and /stats still answer 200.
package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Server is one edge.
type Server struct {
	Listen string
	Name   string
	// FailFile: while a file exists at this path, media requests fail
	// (500) and the health and stats endpoints still answer; empty: never.
	// Looked up on every media request, so a drill takes effect at once.
	FailFile string

	// Clock, if set, is the time the live playlists follow (tests).
	Clock func() time.Time

	conns atomic.Int64
	bytes atomic.Int64
	rate  atomic.Int64 // bytes in the last second
}

// Handler serves /live/{channel}/{bitrate}/index.m3u8 and .../segN.ts (and
// the same under /vod/), /stats and /health.
func (s *Server) Handler() http.Handler {
	segments := NewMuxer()
	now := s.Clock
	if now == nil {
		now = time.Now
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"cpu": 0.1, "bandwidth_mbps": float64(s.rate.Load()) * 8 / 1e6, "connections": s.conns.Load(),
		})
	})
	mux.HandleFunc("GET /live/{channel}/{bitrate}/{file}", func(w http.ResponseWriter, r *http.Request) {
		s.media(w, r, segments, func() string { return LivePlaylist(now()) })
	})
	mux.HandleFunc("GET /vod/{channel}/{bitrate}/{file}", func(w http.ResponseWriter, r *http.Request) { s.media(w, r, segments, VODPlaylist) })
	return mux
}

// media answers a playlist or segment request.
func (s *Server) media(w http.ResponseWriter, r *http.Request, segments *Muxer, playlist func() string) {
	if s.failing() {
		http.Error(w, "media path failing (fail file present)", http.StatusInternalServerError)
		return
	}
	file := r.PathValue("file")
	switch {
	case file == "index.m3u8":
		w.Header().Set("Content-Type", "application/vnd.apple.mpegurl")
		w.Header().Set("Cache-Control", "no-cache") // a live window moves every segment
		s.count(w, []byte(playlist()))
	case strings.HasPrefix(file, "seg") && strings.HasSuffix(file, ".ts"):
		// Any sequence number: a live player asks for the window's, a
		// test for seg0.ts.
		seq, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(file, "seg"), ".ts"), 10, 62)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "video/mp2t")
		s.count(w, segments.Segment(int64(seq)))
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) failing() bool {
	if s.FailFile == "" {
		return false
	}
	_, err := os.Stat(s.FailFile)
	return err == nil
}

// LiveWindow is how many segments a live playlist lists.
const LiveWindow = 6

// LiveSequence is the media sequence number of the newest segment complete
// at t: segment n covers [n, n+1) segment durations of Unix time, so every
// edge (lab or nginx, any city) lists the same window at the same moment
// and a player moving between them continues where it was.
func LiveSequence(t time.Time) int64 {
	return t.UnixMilli()/SegmentDuration.Milliseconds() - 1
}

// LivePlaylist is the media playlist of every channel and bitrate at t: the
// LiveWindow newest segments, seg<n>.ts named by sequence number, no end.
func LivePlaylist(t time.Time) string {
	last := LiveSequence(t)
	return playlist(last-LiveWindow+1, last, "")
}

// VODSegments is the length of every VOD title, in segments.
const VODSegments = 30

// VODPlaylist is the playlist of every title and bitrate: seg0.ts to
// seg29.ts, complete (a VOD playlist lists the whole title and ends).
func VODPlaylist() string {
	return playlist(0, VODSegments-1, "#EXT-X-PLAYLIST-TYPE:VOD\n") + "#EXT-X-ENDLIST\n"
}

// playlist lists segments first..last; the nginx edge's writer
// (nginxWriter) prints the same lines.
func playlist(first, last int64, tags string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:%d\n%s#EXT-X-MEDIA-SEQUENCE:%d\n", targetDuration, tags, first)
	for n := first; n <= last; n++ {
		fmt.Fprintf(&b, "#EXTINF:%.3f,\nseg%d.ts\n", SegmentDuration.Seconds(), n)
	}
	return b.String()
}

// targetDuration is the playlists' target duration: whole seconds, which
// the nginx edge's writer counts in.
const targetDuration = int64(SegmentDuration / time.Second)

func (s *Server) count(w http.ResponseWriter, b []byte) {
	n, _ := w.Write(b)
	s.bytes.Add(int64(n))
}

// Run serves until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.Listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second,
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				s.conns.Add(1)
			case http.StateClosed, http.StateHijacked:
				s.conns.Add(-1)
			}
		}}
	go func() { // bytes per second, for the stats body
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var last int64
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				cur := s.bytes.Load()
				s.rate.Store(cur - last)
				last = cur
			}
		}
	}()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
