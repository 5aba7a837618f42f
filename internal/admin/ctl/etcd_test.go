package ctl

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdclient"
	"github.com/anysched/anysched/internal/etcd/etcdserver"
	"github.com/anysched/anysched/internal/security/pki"
	"github.com/anysched/anysched/internal/wiring/config"
)

// TestEtcdRoles: schedctl etcd-roles provisions an external cluster with
// the root certificate: a dry run changes nothing, the run turns auth on,
// and a second run has nothing to do.
func TestEtcdRoles(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile, _, err := ca.WriteCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(name string, l pki.Leaf) (string, string) {
		c, k, err := ca.WriteLeaf(dir, name, l)
		if err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	srvCert, srvKey := leaf("server", pki.Leaf{CN: "etcd", Hosts: []string{"127.0.0.1"}, Server: true})
	rootCert, rootKey := leaf("root", pki.Leaf{CN: "root", Client: true})
	cityCert, cityKey := leaf("city", pki.Leaf{CN: "anysched-regional.hefei.hefei-1", Client: true})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	emb, err := etcdserver.StartEmbedded(context.Background(), config.Embedded{Dir: filepath.Join(dir, "etcd"), ClientListen: "127.0.0.1:0", PeerListen: "127.0.0.1:0", Name: "ext",
		TLS: config.ServerTLS{CertFile: srvCert, KeyFile: srvKey, ClientCAFile: caFile}}, etcdserver.EmbeddedOptions{}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()

	schedctl := func(extra ...string) string {
		t.Helper()
		args := append([]string{"etcd-roles", "--endpoints", emb.ClientURL, "--cacert", caFile, "--cert", rootCert, "--key", rootKey,
			"--identity", "anysched-regional.hefei.hefei-1", "--identity", "anysched-checker.hefei.c1"}, extra...)
		var out, errOut bytes.Buffer
		if err := Run(context.Background(), args, &out, &errOut); err != nil {
			t.Fatalf("schedctl %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
		}
		return out.String()
	}
	city, err := etcdclient.Connect(config.Etcd{DialTimeout: 2 * time.Second, TLS: config.ClientTLS{CAFile: caFile, CertFile: cityCert, KeyFile: cityKey}}, []string{emb.ClientURL}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer city.Close()
	cityPut := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := city.Put(ctx, "/anysched/topology/current", "x")
		return err
	}

	dry := schedctl("--dry-run")
	for _, want := range []string{"would add user root", "would role anysched-regional.hefei.hefei-1: grant write /anysched/instances/hefei-1", "would enable authentication", "(dry run: nothing changed)"} {
		if !strings.Contains(dry, want) {
			t.Errorf("dry run: missing %q in:\n%s", want, dry)
		}
	}
	if err := cityPut(); err != nil {
		t.Fatalf("after a dry run auth is on: %v", err)
	}
	if out := schedctl(); !strings.Contains(out, "changes made") || !strings.Contains(out, "grant role root to user anysched-center") {
		t.Fatalf("run (the center gets the root role its housekeeping needs by default):\n%s", out)
	}
	if err := cityPut(); err == nil {
		t.Fatal("a city's certificate rewrites topology/current after provisioning")
	}
	if out := schedctl(); !strings.Contains(out, "nothing to change") {
		t.Fatalf("second run:\n%s", out)
	}
	if out := schedctl("--center-maintenance=false"); !strings.Contains(out, "revoke role root from user anysched-center") {
		t.Fatalf("without center maintenance:\n%s", out)
	}
	var errOut bytes.Buffer
	err = Run(context.Background(), []string{"etcd-roles", "--endpoints", strings.Replace(emb.ClientURL, "https", "http", 1), "--cert", rootCert, "--key", rootKey}, io.Discard, &errOut)
	if err == nil || !strings.Contains(err.Error(), "is not https://") {
		t.Fatalf("plaintext endpoint: %v", err)
	}
}
