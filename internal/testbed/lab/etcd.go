package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdmember"
	"github.com/anysched/anysched/internal/etcd/etcdserver"
	"github.com/anysched/anysched/internal/security/pki"
	"github.com/anysched/anysched/internal/wiring/config"
	"go.etcd.io/etcd/client/pkg/v3/transport"
)

// A lab etcd cluster: member k (1-based) runs in namespace <prefix>-etcdk,
// linked to the core at 10.0.1.(4k-2); clients on :2379, peers on :2380 and
// the drill's control endpoint (etcdserver.MemberControl) on :2390. The core's
// BIRD offers the links to the city routers with its other networks, so
// every scheduler reaches every member.
const (
	etcdClientPort  = 2379
	etcdPeerPort    = 2380
	etcdControlPort = 2390
)

// clusterSize is the number of cluster members; 0 with the center's
// embedded etcd.
func (l *Lab) clusterSize() int {
	if l.o.EtcdMembers > 1 {
		return l.o.EtcdMembers
	}
	return 0
}

func etcdAddr(k int) string { return fmt.Sprintf("10.0.1.%d", 4*k-2) }

func etcdName(k int) string { return fmt.Sprintf("etcd%d", k) }

// EtcdEndpoints are the client URLs every scheduler is configured with.
func (l *Lab) EtcdEndpoints() []string {
	if l.clusterSize() == 0 {
		return []string{"https://10.0.0.2:2379"}
	}
	var eps []string
	for k := 1; k <= l.clusterSize(); k++ {
		eps = append(eps, fmt.Sprintf("https://%s:%d", etcdAddr(k), etcdClientPort))
	}
	return eps
}

// etcdControls are the members' control endpoints (the center's
// lab_etcd_members).
func (l *Lab) etcdControls() []string {
	var cs []string
	for k := 1; k <= l.clusterSize(); k++ {
		cs = append(cs, net.JoinHostPort(etcdAddr(k), fmt.Sprint(etcdControlPort)))
	}
	return cs
}

// startEtcdMember starts member k: bin/lab etcd-member in its namespace,
// serving clients and peers over TLS with certificates of the lab's CA.
func (l *Lab) startEtcdMember(k int) error {
	var peers []string
	for j := 1; j <= l.clusterSize(); j++ {
		peers = append(peers, fmt.Sprintf("%s=https://%s:%d", etcdName(j), etcdAddr(j), etcdPeerPort))
	}
	a := etcdAddr(k)
	cert, err := l.creds.issue(etcdName(k), pki.Leaf{CN: etcdName(k), Hosts: []string{a}, Server: true, Client: true})
	if err != nil {
		return err
	}
	return l.start(etcdName(k), etcdName(k), filepath.Join(l.o.Bin, "lab"), "etcd-member",
		"--name", etcdName(k), "--data", filepath.Join(l.o.Dir, etcdName(k)),
		"--client-listen", fmt.Sprintf("%s:%d", a, etcdClientPort), "--peer-listen", fmt.Sprintf("%s:%d", a, etcdPeerPort),
		"--initial-cluster", strings.Join(peers, ","), "--control", fmt.Sprintf("%s:%d", a, etcdControlPort),
		"--tls-cert", cert.Cert, "--tls-key", cert.Key, "--tls-ca", l.creds.CA)
}

// MemberOptions configure one lab etcd member process.
type MemberOptions struct {
	Name, Dir                  string
	ClientListen, PeerListen   string
	InitialCluster, ControlURL string // ControlURL: host:port of the drill endpoint
	// CertFile, KeyFile: the member's certificate, for clients and peers;
	// CAFile: the CA whose client certificates it accepts (required).
	CertFile, KeyFile, CAFile string
}

// RunEtcdMember runs one member of a lab's etcd cluster with its drill
// control endpoint until ctx ends (bin/lab etcd-member, started by the lab
// inside the member's namespace).
func RunEtcdMember(ctx context.Context, o MemberOptions, log *slog.Logger) error {
	if o.CertFile == "" || o.KeyFile == "" || o.CAFile == "" {
		return errors.New("etcd-member: --tls-cert, --tls-key and --tls-ca are required (a member listens beyond loopback)")
	}
	tlsInfo := transport.TLSInfo{CertFile: o.CertFile, KeyFile: o.KeyFile, TrustedCAFile: o.CAFile, ClientCertAuth: true}
	e, err := etcdserver.StartEmbedded(ctx, config.Embedded{Name: o.Name, Dir: o.Dir, ClientListen: o.ClientListen, PeerListen: o.PeerListen},
		etcdserver.EmbeddedOptions{InitialCluster: o.InitialCluster, ClusterToken: "anysched-lab", ClientTLS: tlsInfo, PeerTLS: tlsInfo}, log)
	if err != nil {
		return err
	}
	defer e.Close()
	ln, err := net.Listen("tcp", o.ControlURL)
	if err != nil {
		return fmt.Errorf("control endpoint: %w", err)
	}
	srv := &http.Server{Handler: &etcdserver.MemberControl{Etcd: e, Ctx: ctx, Log: log}, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); srv.Close() }()
	log.Info("lab etcd member running", "member", o.Name, "client", o.ClientListen, "control", o.ControlURL)
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// EtcdMembers asks each member of a running lab's cluster for its state
// (from the core's namespace, as the center would); nil without a cluster.
func (l *Lab) EtcdMembers(ctx context.Context) []etcdmember.State {
	var out []etcdmember.State
	for k, addr := range l.etcdControls() {
		st := etcdmember.State{Name: etcdName(k + 1)}
		b, err := exec.CommandContext(ctx, "ip", "netns", "exec", l.nsName("core"), "curl", "-s", "--max-time", "3", "http://"+addr+"/member").Output()
		if err != nil || json.Unmarshal(b, &st) != nil {
			st.Error = "no answer from its control endpoint"
		}
		out = append(out, st)
	}
	return out
}

// LinkDelays are the delays the lab gives its city-core links (applied
// with netem unless NoNetem).
func (l *Lab) LinkDelays() []CityDelay { return l.delays }
