// Package edge is a small media edge for the lab: it serves synthetic HLS
// (a media playlist per channel and bitrate, fixed-size segments), answers
// health probes, and reports its load as the JSON stats body the health
// checkers understand ({"cpu", "bandwidth_mbps", "connections"}).
package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
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

	conns atomic.Int64
	bytes atomic.Int64
	rate  atomic.Int64 // bytes in the last second
}

var segment = make([]byte, SegmentBytes) // zeros: the content does not matter

// Handler serves /live/{channel}/{bitrate}/index.m3u8, .../segN.ts, /stats and /health.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"cpu": 0.1, "bandwidth_mbps": float64(s.rate.Load()) * 8 / 1e6, "connections": s.conns.Load(),
		})
	})
	mux.HandleFunc("GET /live/{channel}/{bitrate}/{file}", func(w http.ResponseWriter, r *http.Request) {
		file := r.PathValue("file")
		switch {
		case file == "index.m3u8":
			w.Header().Set("Content-Type", "application/vnd.apple.mpegurl")
			s.count(w, []byte(Playlist()))
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
	})
	return mux
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
