package edge

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// NginxCycle is how many segment files an nginx edge serves from: segment n
// is the file of n mod NginxCycle (nginx cannot compute timestamps). A
// player crossing a cycle sees the timestamps jump back NginxCycle-1
// segments, which ffmpeg takes as a discontinuity and plays through.
const NginxCycle = 100

// nginxConf: stub_status for the checkers; the packager's multivariant
// playlist, the file MultivariantFile in dir when one is written there, for
// every channel; the live playlist is the file
// of the second nginx serves it at (live/<unix second>.m3u8, written ahead
// by nginxWriter), the VOD playlist a constant, segment
// n the file of its last two digits (named captures: rewrite's own
// match resets the numbered ones). One process (no master), in the
// foreground, every file under dir.
const nginxConf = `daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path %[1]s/tmp;
    proxy_temp_path %[1]s/tmp;
    fastcgi_temp_path %[1]s/tmp;
    uwsgi_temp_path %[1]s/tmp;
    scgi_temp_path %[1]s/tmp;
    keepalive_timeout 30s;
    map $msec $live_second { "~^(?<sec>[0-9]+)\." $sec; }
    server {
        listen %[2]s;
        root %[1]s;
        location = /stub_status { stub_status; }
        location = /health { return 200 "ok\n"; }
        location ~ ^/live/[^/]+/[0-9]+/index\.m3u8$ {
            default_type application/vnd.apple.mpegurl;
            add_header Cache-Control no-cache;
            rewrite ^ /live/$live_second.m3u8 break;
        }
        location ~ ^/(live|vod)/[^/]+/multivariant\.m3u8$ {
            default_type application/vnd.apple.mpegurl;
            add_header Cache-Control no-cache;
            try_files /%[5]s =404;
        }
        location ~ ^/vod/[^/]+/[0-9]+/index\.m3u8$ {
            default_type application/vnd.apple.mpegurl;
            return 200 "%[3]s";
        }
        location ~ ^/(live|vod)/[^/]+/[0-9]+/seg(?<cycle>[0-9])\.ts$ {
            default_type video/mp2t;
            root %[4]s;
            rewrite ^ /0$cycle.ts break;
        }
        location ~ ^/(live|vod)/[^/]+/[0-9]+/seg[0-9]*(?<cycle>[0-9][0-9])\.ts$ {
            default_type video/mp2t;
            root %[4]s;
            rewrite ^ /$cycle.ts break;
        }
        location / { return 404; }
    }
}
`

// nginxWriter is the bash script an nginx edge runs beside nginx ("$@"):
// it writes the live playlist of every second from now to liveAhead
// seconds on (dir/live/<unix second>.m3u8, as LivePlaylist has it) and
// removes the past ones, every few seconds, until nginx (which the script's
// own pid becomes) exits. nginx picks the file by its own clock, so the
// window it serves is the clock's whatever the writer's delays (a loaded
// machine once held a writer that rewrote one file on the second more than
// a window move behind); the writer only has to stay liveAhead ahead.
func nginxWriter(dir string) string {
	return fmt.Sprintf(`dir=%[1]q/live
mkdir -p "$dir"
(
  done_to=0
  while kill -0 $$ 2>/dev/null; do
    printf -v now '%%(%%s)T' -1
    for (( t = (done_to > now ? done_to : now); t <= now + %[5]d; t++ )); do
      s=$(( t / %[2]d - 1 ))
      {
        printf '#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:%[2]d\n#EXT-X-MEDIA-SEQUENCE:%%d\n' $(( s - %[3]d + 1 ))
        for (( n = s - %[3]d + 1; n <= s; n++ )); do printf '#EXTINF:%[4]s,\nseg%%d.ts\n' $n; done
      } >"$dir/.$t.tmp" && mv -f "$dir/.$t.tmp" "$dir/$t.m3u8"
      done_to=$(( t + 1 ))
    done
    for f in "$dir"/*.m3u8; do
      t=${f##*/}; t=${t%%.m3u8}
      (( t < now - 30 )) && rm -f "$f"
    done
    sleep 5
  done
) &
exec "$@"
`, dir, targetDuration, LiveWindow, fmt.Sprintf("%.3f", SegmentDuration.Seconds()), liveAhead)
}

// liveAhead is how many seconds of live playlists the nginx edge's writer
// keeps written ahead of the clock.
const liveAhead = 120

// Nginx writes an nginx edge's directory dir (configuration; the segment
// files into segments, shared by the edges of a lab and written once) and
// returns the command that runs it with its playlist writer. listen is
// nginx's listen parameters: an address, and flags if any.
func Nginx(dir, segments, listen string) ([]string, error) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		return nil, errors.New("edge nginx: nginx is not installed (apt-get install nginx), or use the lab's edge")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		return nil, errors.New("edge nginx: the playlist writer needs bash")
	}
	if SegmentDuration%1e9 != 0 {
		return nil, errors.New("edge nginx: the playlist writer counts whole seconds")
	}
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return nil, err
	}
	if err := writeSegments(segments); err != nil {
		return nil, err
	}
	vod := strings.ReplaceAll(VODPlaylist(), "\n", `\n`)
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, dir, listen, vod, segments, MultivariantFile), 0o644); err != nil {
		return nil, err
	}
	// -e: the error log before the configuration is read (the default is
	// under /var/log, which the lab does not touch).
	return []string{bash, "-c", nginxWriter(dir), "nginx-edge", bin, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log")}, nil
}

// writeSegments writes the NginxCycle segment files 00.ts... into dir,
// those that are not there yet (each by rename: nginx never sees half).
func writeSegments(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	m := NewMuxer()
	for n := range int64(NginxCycle) {
		path := filepath.Join(dir, fmt.Sprintf("%02d.ts", n))
		if fi, err := os.Stat(path); err == nil && fi.Size() == SegmentBytes {
			continue
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, m.Segment(n), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
	}
	return nil
}

// MultivariantFile is the file in an nginx edge's directory (Nginx's dir)
// served as /live/<channel>/multivariant.m3u8 and
// /vod/<channel>/multivariant.m3u8: what an origin's packager would put
// in front of the media playlists (MultivariantPlaylist). None: 404.
const MultivariantFile = "multivariant.m3u8"

// MultivariantPlaylist is a multivariant playlist over the media playlists
// <bitrate>/index.m3u8 of the same directory. With steeringURI, it carries
// EXT-X-CONTENT-STEERING naming the scheduler's steering manifest, as a
// packager of a service with steering writes it; the variants have no
// PATHWAY-ID, so they are the base pathway "." on whichever edge serves
// the file.
func MultivariantPlaylist(bitratesKbps []int, steeringURI string) string {
	var b strings.Builder
	b.WriteString("#EXTM3U\n#EXT-X-VERSION:3\n")
	if steeringURI != "" {
		fmt.Fprintf(&b, "#EXT-X-CONTENT-STEERING:SERVER-URI=%q\n", steeringURI)
	}
	for _, kbps := range bitratesKbps {
		fmt.Fprintf(&b, "#EXT-X-STREAM-INF:BANDWIDTH=%d,RESOLUTION=160x90\n%d/index.m3u8\n", kbps*1000, kbps)
	}
	return b.String()
}
