package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdauth"
	"github.com/anysched/anysched/internal/security/pki"
	"github.com/anysched/anysched/internal/stb/token"
	"github.com/anysched/anysched/internal/testbed/sdwatch"
)

// schedulerConfig writes a scheduler's configuration.
func (l *Lab) schedulerConfig(name, body string) (string, error) {
	path := filepath.Join(l.o.Dir, name+".yaml")
	return path, os.WriteFile(path, []byte(body), 0o644)
}

// regionalAdmin is where a regional scheduler's admin listener (metrics)
// listens, inside its namespace.
const regionalAdmin = "127.0.0.1:9101"

// OutlierConfig is the schedulers' outlier block with Options.Outlier:
// short enough for a test (an STB re-asking within 5 s fails the server of
// its last answer, 3 such failures in a row eject it for 5 s).
const OutlierConfig = `outlier:
  enabled: true
  reask_window: 5s
  consecutive_failures: 3
  base_ejection: 5s
  max_ejection: 20s
`

// StartCenter starts the central scheduler (embedded etcd on 10.0.0.2, or
// a client of the lab's etcd cluster), in the secure configuration: etcd
// and the admin API on 10.0.0.2 with mutual TLS, every topology signed.
func (l *Lab) StartCenter() error {
	etcdYAML, err := l.etcdClientYAML(etcdauth.CenterIdentity, l.clusterSize() > 0)
	if err != nil {
		return err
	}
	// A chaos run checks the claims at every revision since it began: keep
	// an hour of history, not the production five minutes, unless the
	// options say otherwise.
	history := time.Hour
	if l.o.EtcdMaxHistory > 0 {
		history = l.o.EtcdMaxHistory
	}
	etcdYAML += fmt.Sprintf("  housekeeping: {max_history: %s}\n", history)
	if l.clusterSize() > 0 {
		etcdYAML += fmt.Sprintf("lab_etcd_members: [%s]\n", strings.Join(l.etcdControls(), ", "))
	} else {
		hosts := []string{"10.0.0.2"}
		if len(l.o.IPv6Only) > 0 { // reached through the relay too
			hosts = append(hosts, "fd00:0:1::2")
		}
		srv, err := l.creds.issue("center-etcd", pki.Leaf{CN: "center-etcd", Hosts: hosts, Server: true})
		if err != nil {
			return err
		}
		etcdYAML += fmt.Sprintf(`  embedded:
    dir: %s
    client_listen: 10.0.0.2:2379
    peer_listen: 127.0.0.1:2380
    tls: {cert_file: %s, key_file: %s, client_ca_file: %s}
    identities: [%s]
`, filepath.Join(l.o.Dir, "etcd"), srv.Cert, srv.Key, l.creds.CA, strings.Join(l.etcdIdentities(), ", "))
	}
	grpcCert, err := l.creds.issue("center-grpc", pki.Leaf{CN: "center-grpc", Hosts: []string{"10.0.0.2"}, Server: true})
	if err != nil {
		return err
	}
	signKey, pubKey, err := l.creds.signingKeys()
	if err != nil {
		return err
	}
	body := fmt.Sprintf(`instance_id: %s
%sgrpc:
  listen: %s
  tls: {cert_file: %s, key_file: %s, client_ca_file: %s}
apply:
  signing_key_file: %s
admin:
  listen: 127.0.0.1:9100
snapshot:
  cache_file: %s
  confirm_interval: 500ms
  trusted_keys: [%s]
announce:
  mode: bgp
  check_interval: 100ms
  rise: 2
  fall: 2
  hold_down: 0s
  drain: {pre_withdraw: 1s, linger: 2s}
  bgp:
    asn: 65300
    router_id: 10.0.0.2
    peers: [{address: 10.0.0.1, asn: 65000, hold_time: 3s, keepalive: 1s}%s]
http:
  listen: %s
dns:
  listen: %s
default_region: %s
lab: true
access_log:
  enabled: false
`, CenterID, etcdYAML, centerGRPC, grpcCert.Cert, grpcCert.Key, l.creds.CA, signKey, filepath.Join(l.o.Dir, "center.cache"), pubKey,
		l.peer6("fd00:0:1::1", 65000), l.listenAll(80), l.listenAll(53), l.o.Cities[0])
	if l.o.QoE { // the center checks the viewers' tokens as the cities do
		keyFile, err := l.TokenKey()
		if err != nil {
			return err
		}
		// The cities' timings: the center plans a fallen city as it would.
		body += l.allocYAML(keyFile)
	}
	if l.o.Outlier {
		body += OutlierConfig
	}
	path, err := l.schedulerConfig("center", body)
	if err != nil {
		return err
	}
	return l.startScheduler("center", "ctr", filepath.Join(l.schedulerBin(), "central-scheduler"), "--config", path)
}

// StartScheduler starts city i's primary (or standby) regional scheduler.
func (l *Lab) StartScheduler(i int, standby bool) error {
	n := i + 1
	id, ns, net, med, prepend := PrimaryID(l.o.Cities[i]), fmt.Sprintf("s%d", n), 2, 10, 0
	if standby {
		id, ns, net, med, prepend = StandbyID(l.o.Cities[i]), fmt.Sprintf("t%d", n), 3, 200, 2
	}
	healthYAML := ""
	if l.o.Edges {
		healthYAML = "health:\n  embedded: true\n  check: {interval: 1s, timeout: 250ms, rise: 2, fall: 2, bandwidth_threshold: 0.9}\n"
	}
	if l.o.QoE {
		keyFile, err := l.TokenKey()
		if err != nil {
			return err
		}
		healthYAML += l.allocYAML(keyFile)
	}
	if l.o.Outlier {
		healthYAML += OutlierConfig
	}
	mode, drain := "bgp", "2s"
	if l.o.OSPF {
		mode, drain = "ospf", "7s" // BIRD spreads router-LSA changes up to 5 s apart
	}
	etcdYAML, err := l.etcdClientYAML(etcdIdentity(l.o.Cities[i], id), true)
	if err != nil {
		return err
	}
	peers := fmt.Sprintf(`{address: 10.%d.%d.1, asn: %d, hold_time: 3s, keepalive: 1s}%s`, n, net, 65100+n, l.peer6(fmt.Sprintf("fd00:%x:%d::1", n, net), 65100+n))
	families := ""
	if l.o.IPv6Only[i] { // no IPv4: its etcd through the center's relay, one IPv6 session, the /128 alone
		etcdYAML = strings.Replace(etcdYAML, "https://10.0.0.2:2379", `"https://`+etcdProxy6+`"`, 1)
		peers = strings.TrimPrefix(l.peer6(fmt.Sprintf("fd00:%x:%d::1", n, net), 65100+n), ", ")
		families = "  families: [ipv6]\n"
	}
	_, pubKey, err := l.creds.signingKeys()
	if err != nil {
		return err
	}
	body := fmt.Sprintf(`instance_id: %s
region: %s
%sadmin:
  listen: %s
snapshot:
  cache_file: %s
  confirm_interval: 500ms
  trusted_keys: [%s]
announce:
  mode: %s
%s  check_interval: 100ms
  rise: 2
  fall: 2
  hold_down: 0s
  drain: {pre_withdraw: 1s, linger: %s}
  bgp:
    asn: %d
    router_id: 10.%d.%d.2
    med: %d
    as_path_prepend: %d
    peers: [%s]
http:
  listen: %s
dns:
  listen: %s
access_log:
  enabled: false
%s`, id, l.o.Cities[i], etcdYAML, regionalAdmin, filepath.Join(l.o.Dir, id+".cache"), pubKey, mode, families, drain, 65200+n, n, net, med, prepend,
		peers, l.listenAll(80), l.listenAll(53), healthYAML)
	path, err := l.schedulerConfig(id, body)
	if err != nil {
		return err
	}
	return l.startScheduler(id, ns, filepath.Join(l.schedulerBin(), "regional-scheduler"), "--config", path)
}

// peer6 is a scheduler's IPv6 BGP session with its router (a YAML list
// item after the IPv4 one) in a dual-stack lab: each family travels over a
// session of its own.
func (l *Lab) peer6(router string, asn int) string {
	if !l.o.DualStack {
		return ""
	}
	return fmt.Sprintf(`, {address: "%s", asn: %d, hold_time: 3s, keepalive: 1s}`, router, asn)
}

// listenAll is a front end's listen address: every IPv4 address, or every
// address of both families in a dual-stack lab.
func (l *Lab) listenAll(port int) string {
	if l.o.DualStack {
		return fmt.Sprintf(`"[::]:%d"`, port)
	}
	return fmt.Sprintf("0.0.0.0:%d", port)
}

// allocYAML is a scheduler's alloc section with QoE: the timings
// (Options.AllocPeriod, SessionTTL; the lab's 2 s and 4 s by default) and
// the lab's viewer-token key, required.
func (l *Lab) allocYAML(keyFile string) string {
	period, ttl := 2*time.Second, 4*time.Second
	if l.o.AllocPeriod > 0 {
		period = l.o.AllocPeriod
	}
	if l.o.SessionTTL > 0 {
		ttl = l.o.SessionTTL
	}
	return fmt.Sprintf("alloc:\n  period: %s\n  session_ttl: %s\n  auth: required\n  keys: [{id: %s, secret_file: %s}]\n", period, ttl, TokenKeyID, keyFile)
}

// The QoE lab's server capacities: two servers per city carry 180 Mbps,
// about what the demo's 30 viewers per city want at the top rung, so the
// allocation has to choose (lower rungs for some, transcoded).
const (
	QoEServerMbps  = 90
	QoEServerUnits = 60
)

// QoEViewers is how many fixed STBs (viewers) per city the QoE lab's load
// runs.
const QoEViewers = 30

// TokenKeyID names the lab's viewer-token key.
const TokenKeyID = "lab"

// TokenKey returns the file holding the lab's viewer-token secret, creating
// it (random, 32 bytes hex) on first use.
func (l *Lab) TokenKey() (string, error) {
	p := filepath.Join(l.o.Dir, "token.key")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return p, os.WriteFile(p, []byte(hex.EncodeToString(b)+"\n"), 0o600)
}

// probeToken is a viewer token for the lab's own probes.
func (l *Lab) probeToken() (string, error) {
	path, err := l.TokenKey()
	if err != nil {
		return "", err
	}
	secret, err := token.ReadSecret(path)
	if err != nil {
		return "", err
	}
	nan := math.NaN()
	return token.Sign(token.Key{ID: TokenKeyID, Secret: secret}, token.Claims{Subject: "lab-probe", IssuedAt: time.Now(), Expires: time.Now().Add(time.Hour), DesiredKbps: nan, DanmakuPerHour: nan, Gift: nan})
}

// start runs a daemon in a namespace, logging to a file.
func (l *Lab) start(name, ns string, args ...string) error {
	return l.startProc(&Proc{Name: name, NS: ns, args: args, log: filepath.Join(l.o.Dir, name+".log")})
}

// startScheduler runs a scheduler (its binary, --config, the file) under
// the lab's watchdog.
func (l *Lab) startScheduler(name, ns string, args ...string) error {
	return l.startProc(&Proc{Name: name, NS: ns, args: args, log: filepath.Join(l.o.Dir, name+".log"), watched: l.o.Watchdog >= 0})
}

func (l *Lab) startProc(p *Proc) error {
	l.mu.Lock()
	l.procs[p.Name] = p
	l.mu.Unlock()
	return p.start(l)
}

func (p *Proc) start(l *Lab) error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", l.nsName(p.NS)}, p.args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the lab's driver
	var w *sdwatch.Watch
	if p.watched {
		p.runs++ // a socket per run: the last run's watcher removes its own
		if w, err = sdwatch.Listen(filepath.Join(l.o.Dir, fmt.Sprintf("%s.%d.notify", p.Name, p.runs)), l.watchdog()); err != nil {
			f.Close()
			return fmt.Errorf("start %s: %w", p.Name, err)
		}
		cmd.Env = append(os.Environ(), w.Env()...)
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done, watchEnd := make(chan struct{}), make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.watch, p.watchEnd = cmd, done, w, watchEnd
	p.mu.Unlock()
	go func() { _ = cmd.Wait(); f.Close(); close(done) }() // its exit is read from cmd.ProcessState
	if w == nil {
		close(watchEnd)
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-done; cancel() }()
	go func() {
		defer close(watchEnd)
		w.Run(ctx, func() { l.watchdogFired(p, cmd, done) })
	}()
	return nil
}

// watchdog is the schedulers' watchdog interval.
func (l *Lab) watchdog() time.Duration {
	if l.o.Watchdog > 0 {
		return l.o.Watchdog
	}
	return 800 * time.Millisecond
}

// watchdogFired does what the units' WatchdogSignal=SIGKILL and
// ExecStopPost do: kill the silent scheduler (SIGKILL ends a stopped
// process too) and remove the service address it left behind.
func (l *Lab) watchdogFired(p *Proc, cmd *exec.Cmd, done chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	out, err := exec.Command("ip", append(append([]string{"netns", "exec", l.nsName(p.NS)}, p.args...), "--cleanup")...).CombinedOutput()
	if l.o.Logger != nil {
		l.o.Logger.Info("lab watchdog: a silent scheduler killed and cleaned up", "daemon", p.Name, "watchdog", l.watchdog(), "cleanup_err", err, "cleanup", strings.TrimSpace(string(out)))
	}
}

// WatchdogFired is when the lab's watchdog last killed the daemon (zero:
// never, in its current or last run).
func (l *Lab) WatchdogFired(name string) time.Time {
	p := l.Proc(name)
	if p == nil {
		return time.Time{}
	}
	if _, _, w, _ := p.run(); w != nil {
		return w.Fired()
	}
	return time.Time{}
}

// Proc returns a daemon by name (center, bird-r1, <city>-1, <city>-2).
func (l *Lab) Proc(name string) *Proc {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.procs[name]
}

// Signal sends sig to the daemon.
func (p *Proc) Signal(sig syscall.Signal) error {
	cmd, _, _, _ := p.run()
	return cmd.Process.Signal(sig)
}

// Wait waits for the daemon to exit, at most d.
func (p *Proc) Wait(d time.Duration) bool {
	_, done, _, _ := p.run()
	select {
	case <-done:
		return true
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// Restart starts an exited daemon again with the same arguments.
func (l *Lab) Restart(name string) error { return l.restart(name, nil) }

// restart starts an exited daemon again, change (if any) applied to it
// once its last run has ended, watchdog clean-up included.
func (l *Lab) restart(name string, change func(*Proc)) error {
	p := l.Proc(name)
	if p == nil {
		return fmt.Errorf("lab: no daemon %q", name)
	}
	if !p.Wait(0) {
		return fmt.Errorf("lab: %s is still running", name)
	}
	// A watchdog that fired cleans up after the kill (the units'
	// ExecStopPost): the new run starts after that, as systemd's would.
	if _, _, _, end := p.run(); end != nil {
		select {
		case <-end:
		case <-time.After(30 * time.Second):
			return fmt.Errorf("lab: %s: its watchdog's clean-up did not end", name)
		}
	}
	if change != nil {
		change(p)
	}
	if err := p.start(l); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	return nil
}

// Log returns a daemon's log.
func (l *Lab) Log(name string) string {
	p := l.Proc(name)
	if p == nil {
		return ""
	}
	b, _ := os.ReadFile(p.log)
	return string(b)
}
