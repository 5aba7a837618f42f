package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadLabFile(t *testing.T) {
	write := func(body string) string {
		p := filepath.Join(t.TempDir(), "lab.yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	f, err := readLabFile(write("cities: [hefei, wuhu]\nstandby: [hefei]\nedges: false\nprefix: asx\netcd_cluster: 3\nedge: nginx\n"))
	if err != nil || len(f.Cities) != 2 || f.Standby[0] != "hefei" || *f.Edges || f.Prefix != "asx" || f.EtcdCluster != 3 || f.Edge != "nginx" {
		t.Fatalf("got %+v, %v", f, err)
	}
	for body, want := range map[string]string{
		"cities: [hefei, atlantis]\n":                     "cities[1]",
		"cities: [hefei]\nstandby: [wuhu]\n":              "standby[0]",
		"cities: [hefei]\nnodes: 3\n":                     "nodes: unknown field",
		"cities: []\n":                                    "cities: 1 to 16",
		"cities: [hefei]\nstandby: [hefei]\nospf: true\n": "BGP-only",
		"cities: [hefei]\netcd_cluster: 2\n":              "etcd_cluster: 2: want 1",
		"cities: [hefei]\nedge: caddy\n":                  `edge: "caddy" is not one of lab, nginx`,
	} {
		if _, err := readLabFile(write(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}
