package lab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/anysched/anysched/internal/testbed/edge"
)

// Edge servers the lab can run.
const (
	EdgeLab   = "lab"   // bin/lab edge (internal/edge): JSON load stats
	EdgeNginx = "nginx" // nginx, as operators run edges: stub_status
)

// edgeHealthPath is what the checkers probe on an edge of the given kind.
func edgeHealthPath(kind string) string {
	if kind == EdgeNginx {
		return "/stub_status"
	}
	return "/stats"
}

// nginxConf is an edge as nginx: the same synthetic HLS as bin/lab edge (a
// three-segment media playlist per channel or title and bitrate, live and
// VOD, fixed-size segments) and stub_status for the checkers. One process
// (no master), in the foreground, every file under dir: the lab's driver
// owns it. It has no fail file (Lab.BreakEdge needs the lab's edge).
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
    server {
        listen %[2]s;
        root %[1]s;
        location = /stub_status { stub_status; }
        location = /health { return 200 "ok\n"; }
        location ~ ^/live/[^/]+/[0-9]+/index\.m3u8$ {
            default_type application/vnd.apple.mpegurl;
            return 200 "%[3]s";
        }
        location ~ ^/vod/[^/]+/[0-9]+/index\.m3u8$ {
            default_type application/vnd.apple.mpegurl;
            return 200 "%[4]s";
        }
        location ~ ^/(live|vod)/[^/]+/[0-9]+/seg[0-9]+\.ts$ {
            default_type video/mp2t;
            rewrite ^ /segment.ts break;
        }
        location / { return 404; }
    }
}
`

// nginxEdge writes an nginx edge's directory (config, segment) and returns
// the command that runs it.
func nginxEdge(dir, listen string) ([]string, error) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		return nil, fmt.Errorf("edge nginx: nginx is not installed (apt-get install nginx), or use the lab's edge")
	}
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "segment.ts"), make([]byte, edge.SegmentBytes), 0o644); err != nil {
		return nil, err
	}
	playlist := strings.ReplaceAll(edge.Playlist(), "\n", `\n`)
	vod := strings.ReplaceAll(edge.VODPlaylist(), "\n", `\n`)
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, dir, listen, playlist, vod), 0o644); err != nil {
		return nil, err
	}
	// -e: the error log before the configuration is read (the default is
	// under /var/log, which the lab does not touch).
	return []string{bin, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log")}, nil
}
