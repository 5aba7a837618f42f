package ctl

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPKI(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := Run(context.Background(), args, &out, &errb)
		return out.String() + errb.String(), err
	}
	if out, err := run("pki", "ca", "--dir", dir); err != nil {
		t.Fatalf("pki ca: %v: %s", err, out)
	}
	if _, err := run("pki", "ca", "--dir", dir); err == nil {
		t.Error("a second CA overwrote the first")
	}
	if out, err := run("pki", "issue", "--ca-dir", dir, "--cn", "alice", "--role", "operator", "--client"); err != nil {
		t.Fatalf("pki issue: %v: %s", err, out)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "alice.pem"))
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatal("no certificate written")
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil || c.Subject.CommonName != "alice" || len(c.URIs) != 1 || c.URIs[0].String() != "urn:anysched:role:operator" {
		t.Fatalf("certificate: CN %q, URIs %v, %v", c.Subject.CommonName, c.URIs, err)
	}
	for _, bad := range [][]string{
		{"pki", "issue", "--ca-dir", dir, "--cn", "bob", "--role", "root", "--client"},
		{"pki", "issue", "--ca-dir", dir, "--cn", "srv", "--server"},
		{"pki", "issue", "--ca-dir", dir, "--cn", "x"},
		{"pki", "mint"},
	} {
		if out, err := run(bad...); err == nil {
			t.Errorf("%s: accepted: %s", strings.Join(bad, " "), out)
		}
	}
}
