package deptest

import (
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/anysched/anysched"

// Forbidden dependencies, by import path prefix.
const (
	etcdClient = "go.etcd.io/etcd/client/v3"
	etcdServer = "go.etcd.io/etcd/server"
	gobgp      = "github.com/osrg/gobgp"
)

// hotPath is the packages an STB's request runs through, and the data they
// read.
func hotPath() []string {
	return ours("internal/stb/steer", "internal/stb/httpd", "internal/stb/dnsd", "internal/stb/balance", "internal/province/topology",
		"internal/stb/accesslog", "internal/stb/overflow", "internal/stb/outlier", "internal/stb/geoip", "internal/stb/token", "internal/province/health/avail")
}

// pkg is one package as go list reports it.
type pkg struct {
	Name    string   // "main" for a command
	Imports []string // direct imports, tests' left out: what a binary links
}

// graph is packages by import path.
type graph map[string]pkg

// load lists every package of the module and everything it imports, in one
// go list call.
func load(t *testing.T) graph {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	cmd := exec.Command(goCmd, "list", "-deps", "-f", `{{.ImportPath}} {{.Name}} {{join .Imports " "}}`, module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	g := graph{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			t.Fatalf("go list: unexpected line %q", line)
		}
		g[f[0]] = pkg{Name: f[1], Imports: f[2:]}
	}
	return g
}

// TestImportDirection loads the import graph once and checks each rule on
// it.
func TestImportDirection(t *testing.T) {
	g := load(t)
	t.Run("hot path links no etcd nor GoBGP", func(t *testing.T) {
		// Answering an STB does no etcd I/O and announces nothing.
		for _, v := range violations(g, hotPath(), prefixes(etcdClient, etcdServer, gobgp)) {
			t.Errorf("the STB hot path links etcd or GoBGP: %s", v)
		}
	})
	t.Run("tools link no etcd server nor GoBGP", func(t *testing.T) {
		// schedctl and healthcheck run no etcd member and announce no route.
		for _, v := range violations(g, ours("schedctl", "healthcheck"), prefixes(etcdServer, gobgp)) {
			t.Errorf("schedctl or healthcheck links the etcd server or GoBGP: %s", v)
		}
	})
	t.Run("regional scheduler links no etcd server", func(t *testing.T) {
		// A city's scheduler is an etcd client: the embedded member is the
		// center's (internal/wiring/app/center).
		for _, v := range violations(g, ours("regional-scheduler"), prefixes(etcdServer)) {
			t.Errorf("regional-scheduler links the etcd server: %s", v)
		}
	})
	t.Run("internal imports no main package", func(t *testing.T) {
		isMain := func(p string) bool { return under(p, module) && g[p].Name == "main" }
		for _, v := range violations(g, g.under(module+"/internal"), isMain) {
			t.Errorf("an internal package imports a main package: %s", v)
		}
	})
	t.Run("testbed stays out of shipped code", func(t *testing.T) {
		// Tests, the bench programs and the lab binary may use it.
		var roots []string
		for _, p := range g.under(module) {
			if !under(p, module+"/internal/testbed") && !under(p, module+"/bench") && !under(p, module+"/deploy/lab") {
				roots = append(roots, p)
			}
		}
		for _, v := range violations(g, roots, prefixes(module+"/internal/testbed")) {
			t.Errorf("shipped code links the testbed: %s", v)
		}
	})
}

// under is the packages of g under prefix.
func (g graph) under(prefix string) []string {
	var out []string
	for p := range g {
		if under(p, prefix) {
			out = append(out, p)
		}
	}
	return out
}

// violations describes each import of a forbidden package by a package
// reached from roots, "A imports F (R -> ... -> A -> F)" with a shortest
// chain from a root, in a stable order. It does not look inside a
// forbidden package: how etcd's packages import each other is etcd's.
func violations(g graph, roots []string, forbidden func(string) bool) []string {
	roots = sortedUnique(roots)
	from := map[string]string{} // package -> the package it was first reached from ("" for a root)
	var queue, out []string
	for _, r := range roots {
		from[r] = ""
		if forbidden(r) {
			out = append(out, fmt.Sprintf("%s itself is forbidden", short(r)))
			continue
		}
		queue = append(queue, r)
	}
	reported := map[[2]string]bool{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range g[p].Imports {
			if forbidden(imp) {
				if e := [2]string{p, imp}; !reported[e] {
					reported[e] = true
					out = append(out, fmt.Sprintf("%s imports %s (%s)", short(p), imp, chainTo(from, p, imp)))
				}
				continue
			}
			if _, seen := from[imp]; !seen {
				from[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return out
}

// chainTo is the import chain from a root through p to imp.
func chainTo(from map[string]string, p, imp string) string {
	chain := []string{short(imp)}
	for ; p != ""; p = from[p] {
		chain = append([]string{short(p)}, chain...)
	}
	return strings.Join(chain, " -> ")
}

// prefixes forbids the packages under any of ps (a path element boundary:
// go.etcd.io/etcd/client/v3 is not go.etcd.io/etcd/client/pkg/v3).
func prefixes(ps ...string) func(string) bool {
	return func(p string) bool {
		for _, pre := range ps {
			if under(p, pre) {
				return true
			}
		}
		return false
	}
}

func under(p, prefix string) bool { return p == prefix || strings.HasPrefix(p, prefix+"/") }

// ours is the import paths of the module's packages at dirs.
func ours(dirs ...string) []string {
	out := make([]string, len(dirs))
	for i, d := range dirs {
		out[i] = module + "/" + d
	}
	return out
}

// short drops the module's path from a package of ours.
func short(p string) string { return strings.TrimPrefix(p, module+"/") }

func sortedUnique(ps []string) []string {
	out := slices.Clone(ps)
	slices.Sort(out)
	return slices.Compact(out)
}

// TestViolationsNameTheChain feeds violations made-up graphs: a check that
// cannot fail guards nothing.
func TestViolationsNameTheChain(t *testing.T) {
	m := func(dir string) string { return ours(dir)[0] }
	g := graph{
		m("internal/stb/httpd"):         {Imports: []string{"net/http", m("internal/stb/steer")}},
		m("internal/stb/steer"):         {Imports: []string{m("internal/province/health"), m("internal/province/topology")}},
		m("internal/province/health"):   {Imports: []string{m("internal/province/topology"), etcdClient}},
		m("internal/province/store"):    {Imports: []string{etcdClient, "go.etcd.io/etcd/client/pkg/v3/transport"}},
		m("internal/province/topology"): {Imports: []string{"fmt"}},
		m("internal/lib"):               {Imports: []string{"example.com/wrapper"}},
		"example.com/wrapper":           {Imports: []string{etcdClient + "/concurrency"}},
		etcdClient:                      {Imports: []string{etcdServer + "/v3/embed"}}, // never looked into
		"net/http":                      {}, "fmt": {},
	}
	for _, c := range []struct {
		name  string
		roots []string
		want  []string
	}{
		{"clean", ours("internal/province/topology"), nil},
		{"through two packages", ours("internal/stb/httpd"), []string{
			"internal/province/health imports go.etcd.io/etcd/client/v3 (internal/stb/httpd -> internal/stb/steer -> internal/province/health -> go.etcd.io/etcd/client/v3)",
		}},
		{"each importer once, from the nearest root", ours("internal/stb/httpd", "internal/province/store", "internal/stb/steer"), []string{
			"internal/province/store imports go.etcd.io/etcd/client/v3 (internal/province/store -> go.etcd.io/etcd/client/v3)",
			"internal/province/health imports go.etcd.io/etcd/client/v3 (internal/stb/steer -> internal/province/health -> go.etcd.io/etcd/client/v3)",
		}},
		{"through a package not ours", ours("internal/lib"), []string{
			"example.com/wrapper imports go.etcd.io/etcd/client/v3/concurrency (internal/lib -> example.com/wrapper -> go.etcd.io/etcd/client/v3/concurrency)",
		}},
		{"a root forbidden itself", []string{etcdClient}, []string{"go.etcd.io/etcd/client/v3 itself is forbidden"}},
	} {
		got := violations(g, c.roots, prefixes(etcdClient, etcdServer))
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: got\n\t%s\nwant\n\t%s", c.name, strings.Join(got, "\n\t"), strings.Join(c.want, "\n\t"))
		}
	}
}

// TestPrefixesStopAtPathElements: a prefix forbids its packages, not its
// namesakes.
func TestPrefixesStopAtPathElements(t *testing.T) {
	f := prefixes(etcdClient, gobgp)
	for p, want := range map[string]bool{
		etcdClient: true, etcdClient + "/concurrency": true, "go.etcd.io/etcd/client/pkg/v3": false,
		"go.etcd.io/etcd/client/v30": false, "github.com/osrg/gobgp/v3/pkg/server": true, "github.com/osrg/gobgpx": false,
	} {
		if f(p) != want {
			t.Errorf("forbidden(%s) = %t, want %t", p, !want, want)
		}
	}
}
