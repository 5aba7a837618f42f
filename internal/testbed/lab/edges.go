package lab

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// The lab's servers per city: one node (topogen: <city>-1) of
// LiveServers live servers and VODServers VOD servers, in that order; with
// Edges, each is an edge at 10.<city>.4.<10+k>:8080 in the city's edge
// namespace.
const (
	LiveServers = 2
	VODServers  = 1
)

// edgeHosts are the last octets of a city's edges, live ones first.
func edgeHosts() []int {
	out := make([]int, LiveServers+VODServers)
	for k := range out {
		out[k] = 10 + k
	}
	return out
}

// EdgeName is the daemon (Proc) name of city i's edge at host 10.<i+1>.4.<host>.
func EdgeName(i, host int) string { return fmt.Sprintf("edge-%d-%d", i+1, host) }

// EdgeAt returns the edge daemon serving a redirect target (a URL or
// host:port on 10.<city>.4.<host>), if it is one of the lab's edges.
func (l *Lab) EdgeAt(target string) (string, bool) {
	hostport := target
	if rest, ok := strings.CutPrefix(target, "http://"); ok {
		hostport, _, _ = strings.Cut(rest, "/")
	}
	ap, err := netip.ParseAddrPort(hostport)
	if err != nil || !ap.Addr().Is4() {
		return "", false
	}
	b := ap.Addr().As4()
	if !l.o.Edges || b[0] != 10 || b[2] != 4 || int(b[1]) < 1 || int(b[1]) > len(l.o.Cities) || b[3] < 10 || int(b[3]) >= 10+LiveServers+VODServers {
		return "", false
	}
	return EdgeName(int(b[1])-1, int(b[3])), true
}

// failFile is the file whose presence makes edge name's media path fail.
func (l *Lab) failFile(name string) string { return filepath.Join(l.o.Dir, name+".fail") }

// BreakEdge makes a lab edge (by daemon name) fail every playlist and
// segment request (500) while its health and stats endpoints keep
// answering, as a broken disk or origin would; BreakEdge(name, false) heals
// it. Only the lab's own edge server has the switch (not nginx).
func (l *Lab) BreakEdge(name string, broken bool) error {
	if !l.o.Edges || l.o.EdgeServer == EdgeNginx {
		return errors.New("lab: BreakEdge needs the lab's own edges (Edges, EdgeServer lab)")
	}
	if l.Proc(name) == nil {
		return fmt.Errorf("lab: no edge %q", name)
	}
	if broken {
		return os.WriteFile(l.failFile(name), []byte("media requests fail while this file exists\n"), 0o644)
	}
	if err := os.Remove(l.failFile(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
