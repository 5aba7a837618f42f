package certstore

import (
	"crypto/tls"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/logtest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func current(s *Store, sni string) string {
	c, _ := s.GetCertificate(&tls.ClientHelloInfo{ServerName: sni})
	return serialOf(c)
}

// TestReloadOnFileChange: Run's poll sees a rename over the files and an
// in-place rewrite, and swaps the new certificate in.
func TestReloadOnFileChange(t *testing.T) {
	ca, dir := newTestCA(t), t.TempDir()
	a := ca.sign(t, leafSpec{names: []string{"live.iptv.example"}})
	reg := prometheus.NewRegistry()
	s, err := New(Options{Pairs: []Pair{install(t, dir, "live", a)}, ReloadInterval: 5 * time.Millisecond, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	runStore(t, s)

	b := ca.sign(t, leafSpec{names: []string{"live.iptv.example"}})
	p := install(t, dir, "live", b)
	eventually(t, 10*time.Second, "the renamed certificate", func() bool { return current(s, "live.iptv.example") == b.serial })

	c := ca.sign(t, leafSpec{names: []string{"live.iptv.example"}})
	// In place, key first: a poll may see the new key with the old
	// certificate, or a file half written, fail, and must then load the
	// pair once both are complete.
	if err := os.WriteFile(p.KeyFile, c.keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.CertFile, c.certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the rewritten certificate", func() bool { return current(s, "live.iptv.example") == c.serial })
	if ok := testutil.ToFloat64(s.m.reloadOK); ok < 3 {
		t.Errorf("reloads ok = %v, want >= 3", ok)
	}
}

// TestBadFileKeepsPrevious: whatever is wrong with the new files, the
// previous set stays in use and the error is returned, logged and counted;
// the poll does not retry files it failed on until they change.
func TestBadFileKeepsPrevious(t *testing.T) {
	ca := newTestCA(t)
	other := ca.sign(t, leafSpec{names: []string{"live.iptv.example"}})
	for _, c := range []struct {
		name   string
		break_ func(t *testing.T, p Pair)
		want   string
	}{
		{"certificate not PEM", func(t *testing.T, p Pair) { writeAtomic(t, p.CertFile, []byte("not a certificate"), 0o644) }, "holds no PEM certificate"},
		{"certificate truncated", func(t *testing.T, p Pair) {
			writeAtomic(t, p.CertFile, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), 0o644)
		}, "live.pem"},
		{"key not PEM", func(t *testing.T, p Pair) { writeAtomic(t, p.KeyFile, []byte("secret"), 0o600) }, "holds no PEM private key"},
		{"key of another certificate", func(t *testing.T, p Pair) { writeAtomic(t, p.KeyFile, other.keyPEM, 0o600) }, "is not the key of"},
		{"key readable by others", func(t *testing.T, p Pair) { os.Chmod(p.KeyFile, 0o644) }, "readable by group/others (mode 0644)"},
		{"key readable by group", func(t *testing.T, p Pair) { os.Chmod(p.KeyFile, 0o640) }, "readable by group/others (mode 0640)"},
		{"certificate missing", func(t *testing.T, p Pair) { os.Remove(p.CertFile) }, "no such file"},
		{"key is a directory", func(t *testing.T, p Pair) { os.Remove(p.KeyFile); os.Mkdir(p.KeyFile, 0o700) }, "not a regular file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, logs := t.TempDir(), &logBuffer{}
			good := ca.sign(t, leafSpec{names: []string{"live.iptv.example"}})
			p := install(t, dir, "live", good)
			reg := prometheus.NewRegistry()
			s, err := New(Options{Pairs: []Pair{p}, Logger: logs.logger(), Registerer: reg})
			if err != nil {
				t.Fatal(err)
			}
			c.break_(t, p)
			err = s.Reload()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Reload: %v, want an error with %q", err, c.want)
			}
			if got := current(s, "live.iptv.example"); got != good.serial {
				t.Errorf("serving %s after a bad reload, want the previous %s", got, good.serial)
			}
			if !strings.Contains(logs.String(), "previous ones stay in use") {
				t.Errorf("no error logged: %s", logs)
			}
			s.poll() // the same broken files: not retried
			s.poll()
			if e := testutil.ToFloat64(s.m.reloadErr); e != 1 {
				t.Errorf("reload errors = %v, want 1", e)
			}
			if g := gauge(t, reg, "anysched_certstore_reload_failing_bool"); g != 1 {
				t.Errorf("failing = %v, want 1", g)
			}

			// Repaired: the poll sees it.
			os.Remove(p.KeyFile)
			fixed := ca.sign(t, leafSpec{names: []string{"live.iptv.example"}})
			install(t, dir, "live", fixed)
			s.poll()
			if got := current(s, "live.iptv.example"); got != fixed.serial {
				t.Errorf("serving %s after the repair, want %s", got, fixed.serial)
			}
			if g := gauge(t, reg, "anysched_certstore_reload_failing_bool"); g != 0 {
				t.Errorf("failing = %v after the repair, want 0", g)
			}
		})
	}
}

// TestNewRefuses: a store cannot start without a good set.
func TestNewRefuses(t *testing.T) {
	ca, dir := newTestCA(t), t.TempDir()
	p := install(t, dir, "live", ca.sign(t, leafSpec{names: []string{"live.iptv.example"}}))
	open := install(t, dir, "open", ca.sign(t, leafSpec{names: []string{"open.example"}}))
	os.Chmod(open.KeyFile, 0o604)
	for _, c := range []struct {
		name string
		o    Options
		want string
	}{
		{"no pairs", Options{}, "no certificates"},
		{"no key file", Options{Pairs: []Pair{{CertFile: p.CertFile}}}, "both required"},
		{"listed twice", Options{Pairs: []Pair{p, p}}, "listed twice"},
		{"key mode", Options{Pairs: []Pair{p, open}}, "open-key.pem is readable by group/others (mode 0604): chmod 600"},
		{"negative keys", Options{Pairs: []Pair{p}, TicketKeys: -1}, "must not be negative"},
	} {
		if _, err := New(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// TestExpiredIsServed: an expired certificate is loaded with a warning
// and its expiry exported; so is one not yet valid.
func TestExpiredIsServed(t *testing.T) {
	ca, dir, logs := newTestCA(t), t.TempDir(), &logBuffer{}
	old := ca.sign(t, leafSpec{names: []string{"old.example"}, notBefore: time.Now().Add(-48 * time.Hour), notAfter: time.Now().Add(-24 * time.Hour)})
	early := ca.sign(t, leafSpec{names: []string{"early.example"}, notBefore: time.Now().Add(24 * time.Hour), notAfter: time.Now().Add(48 * time.Hour)})
	reg := prometheus.NewRegistry()
	s, err := New(Options{Pairs: []Pair{install(t, dir, "old", old), install(t, dir, "early", early)}, Logger: logs.logger(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if current(s, "old.example") != old.serial || current(s, "early.example") != early.serial {
		t.Error("expired or early certificate not served")
	}
	for _, w := range []string{"expired on", "is not valid before"} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("no warning %q in %s", w, logs)
		}
	}
	want := s.set.Load().entries[0].notAfter.Unix()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, mf := range mfs {
		if mf.GetName() != "anysched_certstore_certificate_expiry_timestamp_seconds" {
			continue
		}
		for _, m := range mf.Metric {
			found++
			for _, l := range m.Label {
				if l.GetName() == "name" && l.GetValue() == "old.example" && int64(m.Gauge.GetValue()) != want {
					t.Errorf("expiry of old.example = %v, want %d", m.Gauge.GetValue(), want)
				}
			}
		}
	}
	if found != 2 {
		t.Errorf("%d expiry series, want 2", found)
	}
}

// gauge reads an unlabelled gauge from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.Metric[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestLoadsSayWhy: the log says what made each load happen: the start,
// SIGHUP (Reload), a file change (it once called the first load a reload).
func TestLoadsSayWhy(t *testing.T) {
	ca, dir := newTestCA(t), t.TempDir()
	rec := logtest.New()
	s, err := New(Options{Pairs: []Pair{install(t, dir, "live", ca.sign(t, leafSpec{names: []string{"live.iptv.example"}}))}, Logger: rec.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	var triggers []string
	for _, r := range rec.Containing(slog.LevelInfo, "certificates loaded") {
		triggers = append(triggers, r.Attrs["trigger"])
	}
	if strings.Join(triggers, ",") != "start,SIGHUP" {
		t.Errorf("load triggers %v, want [start SIGHUP]", triggers)
	}
}
