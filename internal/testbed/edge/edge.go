// Package edge is a small media edge for the lab: it serves synthetic HLS
// (a media playlist per channel or title and bitrate, fixed-size
// segments), answers health probes, and reports its load as the JSON stats
// body the health checkers understand ({"cpu", "bandwidth_mbps",
// "connections"}).
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

// SegmentBytes is the size of every synthetic segment.
const SegmentBytes = 32 << 10

// Server is one edge.
type Server struct {
	Listen string
	Name   string
	// FailFile: while a file exists at this path, media requests fail
	// (500) and the health and stats endpoints still answer; empty: never.
	// Looked up on every media request, so a drill takes effect at once.
	FailFile string

	conns atomic.Int64
	bytes atomic.Int64
	rate  atomic.Int64 // bytes in the last second
}

var segment = make([]byte, SegmentBytes) // zeros: the content does not matter

// Handler serves /live/{channel}/{bitrate}/index.m3u8 and .../segN.ts (and
// the same under /vod/), /stats and /health.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"cpu": 0.1, "bandwidth_mbps": float64(s.rate.Load()) * 8 / 1e6, "connections": s.conns.Load(),
		})
	})
	mux.HandleFunc("GET /live/{channel}/{bitrate}/{file}", func(w http.ResponseWriter, r *http.Request) { s.media(w, r, Playlist()) })
	mux.HandleFunc("GET /vod/{channel}/{bitrate}/{file}", func(w http.ResponseWriter, r *http.Request) { s.media(w, r, VODPlaylist()) })
	return mux
}

// media answers a playlist or segment request.
func (s *Server) media(w http.ResponseWriter, r *http.Request, playlist string) {
	if s.failing() {
		http.Error(w, "media path failing (fail file present)", http.StatusInternalServerError)
		return
	}
	file := r.PathValue("file")
	switch {
	case file == "index.m3u8":
		w.Header().Set("Content-Type", "application/vnd.apple.mpegurl")
		s.count(w, []byte(playlist))
	case strings.HasPrefix(file, "seg") && strings.HasSuffix(file, ".ts"):
		if _, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(file, "seg"), ".ts")); err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "video/mp2t")
		s.count(w, segment)
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

// Playlist is the media playlist of every channel and bitrate: three
// two-second segments, seg0.ts to seg2.ts.
func Playlist() string {
	var b strings.Builder
	b.WriteString("#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:0\n")
	for i := range 3 {
		fmt.Fprintf(&b, "#EXTINF:2.0,\nseg%d.ts\n", i)
	}
	return b.String()
}

// VODPlaylist is the playlist of every title and bitrate: Playlist's
// segments, complete (a VOD playlist lists the whole title and ends).
func VODPlaylist() string {
	return strings.Replace(Playlist(), "#EXT-X-MEDIA-SEQUENCE:0\n", "#EXT-X-PLAYLIST-TYPE:VOD\n#EXT-X-MEDIA-SEQUENCE:0\n", 1) + "#EXT-X-ENDLIST\n"
}

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
