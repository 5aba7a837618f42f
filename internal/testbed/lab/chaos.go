package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdauth"
	"github.com/anysched/anysched/internal/security/pki"
	"github.com/vishvananda/netns"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// The fault actions and probes of a chaos run (chaos_run.go, the faults in
// chaos_fault*.go): sockets made inside a lab namespace from this process,
// the cluster's etcd as its root user, a city's core link down and up,
// schedctl as the lab's admin, and what a torn-down lab left behind.

// DialIn returns a dialer whose connections start in the lab namespace
// short ("c1", "s2", "core"): the socket is made on a thread switched into
// the namespace, and keeps it. The load, the metrics samples and the etcd
// client use it instead of a process per request.
func (l *Lab) DialIn(short string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	name := l.nsName(short)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			return nil, fmt.Errorf("lab: this thread's namespace: %w", err)
		}
		defer orig.Close()
		target, err := netns.GetFromName(name)
		if err != nil {
			runtime.UnlockOSThread()
			return nil, fmt.Errorf("lab: namespace %s: %w", name, err)
		}
		defer target.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			return nil, fmt.Errorf("lab: enter %s: %w", name, err)
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, addr)
		if serr := netns.Set(orig); serr != nil {
			// The thread stays locked: the runtime ends it with this
			// goroutine rather than run others in the wrong namespace.
			if conn != nil {
				conn.Close()
			}
			return nil, fmt.Errorf("lab: back from %s: %w", name, serr)
		}
		runtime.UnlockOSThread()
		return conn, err
	}
}

// AdminGet GETs path from a daemon's admin listener (127.0.0.1 inside its
// namespace): the center on :9100, a regional scheduler on :9101.
func (l *Lab) AdminGet(ctx context.Context, instance, path string) (string, error) {
	ns, addr := l.adminOf(instance)
	if ns == "" {
		return "", fmt.Errorf("lab: no scheduler %q", instance)
	}
	c := &http.Client{Transport: &http.Transport{DialContext: l.DialIn(ns), DisableKeepAlives: true}, Timeout: 2 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", fmt.Errorf("lab: admin of %s: %w", instance, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("lab: admin of %s: %s", instance, resp.Status)
	}
	return string(b), err
}

// adminOf is where an instance's admin listener is.
func (l *Lab) adminOf(instance string) (ns, addr string) {
	if instance == CenterID {
		return "ctr", "127.0.0.1:9100"
	}
	for i, c := range l.o.Cities {
		switch instance {
		case PrimaryID(c):
			return fmt.Sprintf("s%d", i+1), regionalAdmin
		case StandbyID(c):
			if l.o.Standby[i] {
				return fmt.Sprintf("t%d", i+1), regionalAdmin
			}
		}
	}
	return "", ""
}

// SnapshotRevision reads an instance's anysched_snapshot_revision_number.
func (l *Lab) SnapshotRevision(ctx context.Context, instance string) (int64, error) {
	m, err := l.AdminGet(ctx, instance, "/metrics")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(m, "\n") {
		if v, ok := strings.CutPrefix(line, "anysched_snapshot_revision_number "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int64(f), err
		}
	}
	return 0, fmt.Errorf("lab: %s exports no anysched_snapshot_revision_number", instance)
}

// EtcdClient connects to the lab's etcd cluster as its root user (the
// certificate the lab provisions roles with), from the core's namespace.
// The caller closes it.
func (l *Lab) EtcdClient(ctx context.Context) (*clientv3.Client, error) {
	if l.clusterSize() == 0 {
		return nil, errors.New("lab: EtcdClient needs the lab's etcd cluster (EtcdMembers 3 or 5)")
	}
	return l.EtcdClientAs(ctx, etcdauth.RootUser)
}

// EtcdClientAs connects to the lab's etcd (the cluster, or the center's
// embedded member) from the core's namespace with a client certificate of
// CN cn: a daemon's etcd user, as a host that holds its key would. The
// caller closes it.
func (l *Lab) EtcdClientAs(ctx context.Context, cn string) (*clientv3.Client, error) {
	root, err := l.creds.issue(cn, pki.Leaf{CN: cn, Client: true})
	if err != nil {
		return nil, err
	}
	tlsCfg, err := transport.TLSInfo{CertFile: root.Cert, KeyFile: root.Key, TrustedCAFile: l.creds.CA}.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("lab: etcd client TLS: %w", err)
	}
	dial := l.DialIn("core")
	return clientv3.New(clientv3.Config{
		Endpoints: l.EtcdEndpoints(), TLS: tlsCfg, DialTimeout: 5 * time.Second, Context: ctx,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dial(ctx, "tcp", addr)
		})},
	})
}

// EtcdLeader returns the member (1-based) that leads the cluster now.
func (l *Lab) EtcdLeader(ctx context.Context, cli *clientv3.Client) (int, error) {
	for k, ep := range l.EtcdEndpoints() {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cli.Status(sctx, ep)
		cancel()
		if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
			return k + 1, nil
		}
	}
	return 0, errors.New("lab: no etcd member says it leads")
}

// SetCityLink takes city i's link to the core down (ip link set down on
// the core's end) or brings it up again.
func (l *Lab) SetCityLink(i int, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	if err := l.in("core", "link", "set", fmt.Sprintf("city%d", i+1), state); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	return nil
}

// Schedctl runs the lab's schedctl (Bin) in the center's namespace as the
// lab's admin and returns its output.
func (l *Lab) Schedctl(ctx context.Context, args ...string) (string, error) {
	argv := append([]string{"netns", "exec", l.nsName("ctr"), filepath.Join(l.o.Bin, "schedctl")}, l.SchedctlArgs()...)
	out, err := exec.CommandContext(ctx, "ip", append(argv, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("schedctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Running reports whether the daemon called name runs (not exited; a
// stopped one runs).
func (l *Lab) Running(name string) bool {
	p := l.Proc(name)
	if p == nil {
		return false
	}
	cmd, _, _, _ := p.run()
	return cmd != nil && !p.Wait(0)
}

// Daemons lists the names of every daemon the lab started.
func (l *Lab) Daemons() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.procs))
	for n := range l.procs {
		out = append(out, n)
	}
	return out
}

// Leftovers lists what a lab with this prefix and work directory left
// behind after Down: namespaces, host-side interfaces, the service
// address or its routes in this namespace, processes.
func Leftovers(prefix, dir string) []string {
	var out []string
	if b, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if name, _, _ := strings.Cut(strings.TrimSpace(line), " "); strings.HasPrefix(name, prefix+"-") {
				out = append(out, "namespace "+name)
			}
		}
	}
	if b, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, ": "+prefix+"v") {
				out = append(out, "interface "+strings.TrimSpace(line))
			}
		}
	}
	for _, what := range [][]string{{"-o", "addr", "show"}, {"route", "show", "table", "all"}} {
		if b, err := exec.Command("ip", what...).Output(); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, ServiceIP.String()) || strings.Contains(line, "198.18.0.0/26") {
					out = append(out, "host "+what[len(what)-2]+": "+strings.TrimSpace(line))
				}
			}
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	self := os.Getpid()
	for _, p := range procs {
		pid, _ := strconv.Atoi(strings.Split(p, "/")[2])
		if pid == self {
			continue
		}
		if b, err := os.ReadFile(p); err == nil && dir != "" && strings.Contains(string(b), dir+"/") {
			out = append(out, fmt.Sprintf("process %d: %s", pid, strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")))
		}
	}
	return out
}

// signal sends sig to a daemon by name.
func (l *Lab) signal(name string, sig syscall.Signal) error {
	p := l.Proc(name)
	if p == nil {
		return fmt.Errorf("lab: no daemon %q", name)
	}
	if cmd, _, _, _ := p.run(); cmd == nil {
		return fmt.Errorf("lab: no daemon %q", name)
	}
	return p.Signal(sig)
}
