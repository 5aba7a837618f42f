package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/testbed/port"
	"github.com/anysched/anysched/internal/testbed/syncbuf"
	"github.com/anysched/anysched/internal/testbed/wait"
)

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func TestEdgeServesHLSAndStats(t *testing.T) {
	now := time.Unix(1_700_000_000, 400e6)
	s := &Server{Clock: func() time.Time { return now }}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	for _, tc := range []struct {
		path, want string // want: in the playlist
		segments   int
	}{
		{"/live/ch1/6000/", "#EXT-X-MEDIA-SEQUENCE:1699999994\n", LiveWindow},
		{"/vod/title7/2000/", "#EXT-X-ENDLIST", VODSegments},
	} {
		resp, body := get(t, ts.URL+tc.path+"index.m3u8")
		if resp.StatusCode != 200 || !strings.HasPrefix(body, "#EXTM3U") || strings.Count(body, ".ts") != tc.segments || !strings.Contains(body, tc.want) {
			t.Fatalf("playlist %s: %d %q", tc.path, resp.StatusCode, body)
		}
		for _, seg := range []string{"seg1.ts", "seg1699999999.ts"} {
			resp, body = get(t, ts.URL+tc.path+seg)
			if resp.StatusCode != 200 || len(body) != SegmentBytes || body[0] != 0x47 {
				t.Fatalf("segment %s%s: %d, %d bytes", tc.path, seg, resp.StatusCode, len(body))
			}
		}
		for _, bad := range []string{"segX.ts", "seg-1.ts", "seg99999999999999999999.ts"} {
			if resp, _ = get(t, ts.URL+tc.path+bad); resp.StatusCode != 404 {
				t.Fatalf("bad segment %s%s: %d", tc.path, bad, resp.StatusCode)
			}
		}
	}
	resp, body := get(t, ts.URL+"/stats")
	var stats map[string]any
	if err := json.Unmarshal([]byte(body), &stats); err != nil || resp.StatusCode != 200 {
		t.Fatalf("stats %q: %v", body, err)
	}
	// The health checkers understand the stats body.
	if _, ok := health.ParseBody(resp.Header.Get("Content-Type"), []byte(body)); !ok {
		t.Fatalf("health.ParseBody does not read %q", body)
	}
}

// TestLivePlaylistFollowsTheClock: the window ends at the newest complete
// segment and moves one segment per segment duration.
func TestLivePlaylistFollowsTheClock(t *testing.T) {
	for _, tc := range []struct {
		at          time.Time
		first, last string
	}{
		{time.Unix(100, 0), "#EXT-X-MEDIA-SEQUENCE:94\n#EXTINF:1.000,\nseg94.ts\n", "seg99.ts\n"},
		{time.Unix(100, 999e6), "#EXT-X-MEDIA-SEQUENCE:94\n", "seg99.ts\n"},
		{time.Unix(101, 0), "#EXT-X-MEDIA-SEQUENCE:95\n", "seg100.ts\n"},
	} {
		p := LivePlaylist(tc.at)
		if !strings.Contains(p, tc.first) || !strings.HasSuffix(p, tc.last) || strings.Contains(p, "ENDLIST") {
			t.Errorf("at %v:\n%s", tc.at, p)
		}
	}
}

// TestSegmentsJoin: every segment is whole TS packets with a PAT and PMT
// whose CRCs hold, and segment n+1 continues segment n: the video's
// continuity counter runs on and its first PTS is one segment later.
func TestSegmentsJoin(t *testing.T) {
	m := NewMuxer()
	type state struct {
		cc      map[uint16]int
		firstTS int64
	}
	scan := func(seg []byte) state {
		st := state{cc: map[uint16]int{}, firstTS: -1}
		if len(seg) != SegmentBytes || len(seg)%tsPacket != 0 {
			t.Fatalf("segment of %d bytes", len(seg))
		}
		for off := 0; off < len(seg); off += tsPacket {
			p := seg[off : off+tsPacket]
			pid := uint16(p[1]&0x1f)<<8 | uint16(p[2])
			if p[0] != 0x47 {
				t.Fatalf("no sync byte at %d", off)
			}
			if pid == pidNull {
				continue
			}
			if prev, ok := st.cc[pid]; ok && int(p[3]&0x0f) != (prev+1)%16 {
				t.Fatalf("pid %#x: continuity counter %d after %d", pid, p[3]&0x0f, prev)
			}
			st.cc[pid] = int(p[3] & 0x0f)
			payload := p[4:]
			if p[3]&0x20 != 0 {
				payload = p[5+int(p[4]):]
			}
			switch {
			case pid == 0 || pid == pidPMT:
				sec := payload[1 : 1+3+(int(payload[2]&0x0f)<<8|int(payload[3]))]
				if crc32MPEG(sec) != 0 {
					t.Fatalf("pid %#x: bad CRC", pid)
				}
			case pid == pidVideo && p[1]&0x40 != 0 && st.firstTS < 0:
				h := payload[9:14]
				st.firstTS = int64(h[0]>>1&7)<<30 | int64(h[1])<<22 | int64(h[2]>>1)<<15 | int64(h[3])<<7 | int64(h[4]>>1)
			}
		}
		return st
	}
	for _, seq := range []int64{0, 1, 7, 1_700_000_000} {
		a, b := scan(m.Segment(seq)), scan(m.Segment(seq+1))
		if want := (a.cc[pidVideo] + 1) % 16; b.cc[pidVideo] != (want+m.packets-1)%16 {
			t.Errorf("seq %d: video continuity ends at %d, next segment ends at %d (%d packets each)", seq, a.cc[pidVideo], b.cc[pidVideo], m.packets)
		}
		if d := (b.firstTS - a.firstTS) & (1<<33 - 1); d != segTicks || a.firstTS != (ptsOffset+seq*segTicks)&(1<<33-1) {
			t.Errorf("seq %d: first PTS %d, next %d (want %d apart)", seq, a.firstTS, b.firstTS, segTicks)
		}
	}
}

// TestFailFile: while the fail file exists the media path fails and the
// probes still succeed; without it the edge serves again.
func TestFailFile(t *testing.T) {
	fail := filepath.Join(t.TempDir(), "fail")
	s := &Server{FailFile: fail}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	status := func(p string) int {
		resp, _ := get(t, ts.URL+p)
		return resp.StatusCode
	}
	paths := []struct {
		path  string
		media bool
	}{
		{"/live/ch1/730/index.m3u8", true}, {"/live/ch1/730/seg0.ts", true}, {"/vod/t1/730/index.m3u8", true},
		{"/health", false}, {"/stats", false},
	}
	for _, step := range []struct {
		name   string
		exists bool
	}{{"before", false}, {"failing", true}, {"healed", false}} {
		if step.exists {
			if err := os.WriteFile(fail, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		} else {
			_ = os.Remove(fail)
		}
		for _, p := range paths {
			want := 200
			if step.exists && p.media {
				want = 500
			}
			if got := status(p.path); got != want {
				t.Errorf("%s: %s answered %d, want %d", step.name, p.path, got, want)
			}
		}
	}
}

// ffmpegPlays plays url with ffmpeg for 4 s of media (decoding every frame)
// and returns the media time it output, the sequence numbers of the
// segments it fetched, and its warnings and errors. Skips without ffmpeg.
func ffmpegPlays(t *testing.T, url string) (played time.Duration, seqs []int64, problems []string) {
	t.Helper()
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg is not installed (apt-get install ffmpeg)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ffmpeg", "-hide_banner", "-nostdin", "-loglevel", "repeat+level+info", "-nostats",
		"-progress", "pipe:1", "-rw_timeout", "2000000", "-i", url, "-t", "4", "-f", "null", "-")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ffmpeg %s: %v\n%s", url, err, stderr.String())
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "out_time_us="); ok {
			if us, err := strconv.ParseInt(v, 10, 64); err == nil {
				played = time.Duration(us) * time.Microsecond
			}
		}
	}
	seg := regexp.MustCompile(`Opening '[^']*/seg([0-9]+)\.ts'`)
	for _, line := range strings.Split(stderr.String(), "\n") {
		if m := seg.FindStringSubmatch(line); m != nil {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			seqs = append(seqs, n)
		}
		if strings.Contains(line, "[warning]") || strings.Contains(line, "[error]") || strings.Contains(line, "[fatal]") {
			problems = append(problems, line)
		}
	}
	return played, seqs, problems
}

// checkPlayed: ffmpeg decoded the 4 s it was asked for, cleanly, from
// consecutive segments.
func checkPlayed(t *testing.T, what string, played time.Duration, seqs []int64, problems []string) {
	t.Helper()
	if played < 4*time.Second-200*time.Millisecond || len(problems) > 0 {
		t.Errorf("%s: played %v; %q", what, played, problems)
	}
	for k := 1; k < len(seqs); k++ {
		if seqs[k] != seqs[k-1]+1 {
			t.Errorf("%s: segments %v are not consecutive", what, seqs)
			break
		}
	}
	t.Logf("%s: played %v from segments %v", what, played, seqs)
}

// TestFFmpegPlaysTheEdge: a real player plays the live window as it moves
// (4 s of media where the window holds 3 s behind the live edge, so it
// must reload) and a VOD title.
func TestFFmpegPlaysTheEdge(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer((&Server{}).Handler())
	defer ts.Close()
	played, seqs, problems := ffmpegPlays(t, ts.URL+"/live/ch1/730/index.m3u8")
	checkPlayed(t, "live", played, seqs, problems)
	if len(seqs) < 4 {
		t.Errorf("live: %d segments fetched, want the window's and newer ones", len(seqs))
	}
	played, seqs, problems = ffmpegPlays(t, ts.URL+"/vod/t1/730/index.m3u8")
	checkPlayed(t, "vod", played, seqs, problems)
	if len(seqs) == 0 || seqs[0] != 0 {
		t.Errorf("vod: segments %v, want from seg0.ts", seqs)
	}
}

// TestFFmpegPlaysNginx: an nginx edge (Nginx) serves the same live window,
// refreshed by its writer, and the segments of every sequence number.
func TestFFmpegPlaysNginx(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("nginx is not installed")
	}
	dir := t.TempDir()
	addr := port.Hold(t).Addr()
	// reuseport: the port this test holds (package port).
	argv, err := Nginx(filepath.Join(dir, "edge"), filepath.Join(dir, "segments"), addr+" reuseport")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	var log syncbuf.Buffer // nginx writes it while the test reads it
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	base := "http://" + addr
	wait.ForErr(t, "nginx serving the live playlist", 10*time.Second, func() error {
		resp, err := http.Get(base + "/live/ch1/730/index.m3u8")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d; %s", resp.StatusCode, log.String())
		}
		return nil
	})
	// nginx serves the playlist of the second it answers in: LivePlaylist
	// of a moment between the request and its answer, however far the
	// writer lags (its files are written ahead).
	for range 3 {
		before := time.Now()
		_, body := get(t, base+"/live/ch1/730/index.m3u8")
		after := time.Now()
		if body != LivePlaylist(before) && body != LivePlaylist(after) {
			t.Errorf("nginx live playlist:\n%s\nwant the window of a moment between the request and its answer:\n%s", body, LivePlaylist(after))
		}
	}
	m := NewMuxer()
	for _, seq := range []int64{0, 7, 42, 1_700_000_123} {
		_, body := get(t, fmt.Sprintf("%s/live/ch1/730/seg%d.ts", base, seq))
		if body != string(m.Segment(seq%NginxCycle)) {
			t.Errorf("seg%d.ts: %d bytes, not segment %d", seq, len(body), seq%NginxCycle)
		}
	}
	played, seqs, problems := ffmpegPlays(t, base+"/live/ch1/730/index.m3u8")
	checkPlayed(t, "nginx live", played, seqs, problems)
	played, seqs, problems = ffmpegPlays(t, base+"/vod/t1/730/index.m3u8")
	checkPlayed(t, "nginx vod", played, seqs, problems)
	resp, _ := get(t, base+"/stub_status")
	if resp.StatusCode != 200 {
		t.Errorf("stub_status: %d", resp.StatusCode)
	}
}
