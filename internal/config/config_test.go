package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultsAreValid(t *testing.T) {
	c := DefaultCenter()
	if err := c.Validate(); err != nil {
		t.Fatalf("center defaults: %v", err)
	}
	r := DefaultRegional()
	r.Region, r.Etcd.Endpoints = "hefei", []string{"http://127.0.0.1:2379"}
	if err := r.Validate(); err != nil {
		t.Fatalf("regional defaults: %v", err)
	}
}

func TestFileOverridesDefaultsAndKeepsTheRest(t *testing.T) {
	c := DefaultCenter()
	if err := LoadFile(write(t, "grpc:\n  listen: 127.0.0.1:1234\nsnapshot:\n  max_staleness: 90s\n"), &c); err != nil {
		t.Fatal(err)
	}
	if c.GRPC.Listen != "127.0.0.1:1234" || c.Snapshot.MaxStaleness != 90*time.Second {
		t.Fatalf("file values not applied: %+v", c)
	}
	if c.Etcd.Embedded.ClientListen != "127.0.0.1:2379" || c.Snapshot.ConfirmInterval != 2*time.Second {
		t.Fatalf("defaults lost: %+v", c)
	}
}

func TestLoadErrorsNameTheField(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"unknown key", "etcd:\n  endpoint: [x]\n", `etcd.endpoint: unknown field (did you mean "endpoints"?)`},
		{"bad duration", "snapshot:\n  max_staleness: soon\n", "snapshot.max_staleness: invalid value"},
		{"wrong kind", "etcd:\n  endpoints: http://x\n", "etcd.endpoints: expected a list"},
		{"regional key in center", "region: hefei\n", "region: unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultCenter()
			err := LoadFile(write(t, tt.body), &c)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	r := DefaultRegional()
	r.Log.Level = "loud"
	r.Etcd.Endpoints = []string{"127.0.0.1:2379"}
	r.Admin.Listen = "nowhere"
	r.Snapshot.MaxStaleness = 0
	r.Etcd.TLS.CertFile = "/no/such/cert.pem"
	err := r.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{
		"region: required", "log.level:", "etcd.endpoints[0]: not an http(s) URL",
		"admin.listen: not host:port", "snapshot.max_staleness: must be > 0",
		"etcd.tls: cert_file and key_file go together", "etcd.tls.cert_file: cannot read",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

func TestCenterGRPCTLSNeedsBothFiles(t *testing.T) {
	c := DefaultCenter()
	c.GRPC.TLS.ClientCAFile = "/no/such/ca.pem"
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "grpc.tls: cert_file and key_file are both required") || !strings.Contains(err.Error(), "grpc.tls.client_ca_file: cannot read") {
		t.Fatalf("got %v", err)
	}
}

func TestAllocValidation(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.key")
	short := filepath.Join(dir, "short.key")
	if err := os.WriteFile(good, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(short, []byte("tooshort"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(a *Alloc)
		want string // "" = valid
	}{
		{"defaults", func(*Alloc) {}, ""},
		{"required with a key", func(a *Alloc) { a.Auth, a.Keys = "required", []TokenKey{{ID: "k1", SecretFile: good}} }, ""},
		{"required without keys", func(a *Alloc) { a.Auth = "required" }, "alloc.keys: at least one key"},
		{"unknown auth", func(a *Alloc) { a.Auth = "sometimes" }, `alloc.auth: "sometimes" is not one of`},
		{"short secret", func(a *Alloc) { a.Keys = []TokenKey{{ID: "k1", SecretFile: short}} }, "alloc.keys[0].secret_file: "},
		{"missing secret file", func(a *Alloc) { a.Keys = []TokenKey{{ID: "k1", SecretFile: filepath.Join(dir, "nope")}} }, "alloc.keys[0].secret_file: "},
		{"duplicate ids", func(a *Alloc) { a.Keys = []TokenKey{{ID: "k", SecretFile: good}, {ID: "k", SecretFile: good}} }, `alloc.keys[1].id: duplicate key id "k"`},
		{"period too short", func(a *Alloc) { a.Period = 100 * time.Millisecond }, "alloc.period: 100ms is out of range"},
		{"ttl below period", func(a *Alloc) { a.SessionTTL = time.Second }, "alloc.session_ttl: 1s must be at least"},
		{"solve timeout too long", func(a *Alloc) { a.SolveTimeout = a.Period }, "alloc.solve_timeout:"},
		{"negative profile", func(a *Alloc) { a.DefaultProfile.Gift = -1 }, "alloc.default_profile.gift: must be >= 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := DefaultRegional()
			r.Region, r.Etcd.Endpoints = "hefei", []string{"http://127.0.0.1:2379"}
			tt.edit(&r.Alloc)
			err := r.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
	r := DefaultRegional()
	if err := LoadFile(write(t, "alloc:\n  perod: 5s\n"), &r); err == nil || !strings.Contains(err.Error(), "alloc.perod: unknown field") {
		t.Fatalf("unknown alloc key: %v", err)
	}
}

func TestCenterLabEtcdMembers(t *testing.T) {
	c := DefaultCenter()
	c.LabEtcdMembers = []string{"10.0.1.2:2390", "nowhere"}
	err := c.Validate()
	for _, want := range []string{"lab_etcd_members: only in a lab", "lab_etcd_members: needs etcd.endpoints", "lab_etcd_members[1]: not host:port"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in: %v", want, err)
		}
	}
	c.Lab, c.LabEtcdMembers = true, []string{"10.0.1.2:2390"}
	c.Etcd.Endpoints = []string{"http://10.0.1.2:2379"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestAllocModel(t *testing.T) {
	r := DefaultRegional()
	r.Region, r.Etcd.Endpoints = "hefei", []string{"http://127.0.0.1:2379"}
	if err := LoadFile(write(t, "alloc:\n  model:\n    a: 5\n    theta_s: 0.3\n"), &r); err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(); err != nil || *r.Alloc.Model.A != 5 || *r.Alloc.Model.Theta != 0.3 || r.Alloc.Model.B != nil {
		t.Fatalf("model %+v: %v", r.Alloc.Model, err)
	}
	bad := DefaultRegional()
	bad.Region, bad.Etcd.Endpoints = "hefei", []string{"http://127.0.0.1:2379"}
	if err := LoadFile(write(t, "alloc:\n  model:\n    c: -1\n    theta_s: 0\n    omega: .nan\n"), &bad); err != nil {
		t.Fatal(err)
	}
	err := bad.Validate()
	for _, want := range []string{"alloc.model.c: -1 must be", "alloc.model.theta_s: must be > 0", "alloc.model.omega: NaN must be"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
	if err := LoadFile(write(t, "alloc:\n  model:\n    alpha: 1\n"), &bad); err == nil || !strings.Contains(err.Error(), "alloc.model.alpha: unknown field") {
		t.Errorf("unknown model key: %v", err)
	}
}

// TestCenterViewerTokens: the center's alloc section takes the token keys a
// city's has, is validated the same way, and refuses the planning keys.
func TestCenterViewerTokens(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.key")
	if err := os.WriteFile(good, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := DefaultCenter()
	if err := LoadFile(write(t, "alloc:\n  auth: required\n  keys:\n    - {id: k1, secret_file: "+good+"}\n  default_profile: {desired_kbps: 2500}\n"), &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if keys, err := c.Alloc.TokenKeys(); err != nil || len(keys) != 1 || keys[0].ID != "k1" || c.Alloc.Leeway != 30*time.Second || c.Alloc.DefaultProfile.DesiredKbps != 2500 {
		t.Fatalf("loaded %+v, keys %v, %v", c.Alloc, keys, err)
	}
	c = DefaultCenter()
	c.Alloc.Auth = "required"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "alloc.keys: at least one key") {
		t.Fatalf("required without keys: %v", err)
	}
	c = DefaultCenter()
	if err := LoadFile(write(t, "alloc:\n  period: 5s\n"), &c); err == nil || !strings.Contains(err.Error(), "alloc.period: unknown field") {
		t.Fatalf("a planning key on the center: %v", err)
	}
}
