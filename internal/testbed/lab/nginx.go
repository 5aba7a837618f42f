package lab

import (
	"path/filepath"

	"github.com/anysched/anysched/internal/testbed/edge"
)

// Edge servers the lab can run.
const (
	EdgeLab   = "lab"   // bin/lab edge (internal/testbed/edge): JSON load stats
	EdgeNginx = "nginx" // nginx, as operators run edges: stub_status
)

// edgeHealthPath is what the checkers probe on an edge of the given kind.
func edgeHealthPath(kind string) string {
	if kind == EdgeNginx {
		return "/stub_status"
	}
	return "/stats"
}

// nginxEdge writes an nginx edge's directory (edge.Nginx: the same HLS as
// bin/lab edge, its live playlist refreshed by a writer beside nginx, and
// stub_status for the checkers) and returns the command that runs it. The
// segment files are shared by the lab's nginx edges. It has no fail file
// (Lab.BreakEdge needs the lab's edge).
func nginxEdge(dir, listen string) ([]string, error) {
	return edge.Nginx(dir, filepath.Join(filepath.Dir(dir), "nginx-segments"), listen)
}
