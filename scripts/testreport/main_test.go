package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFilter: go test -json becomes go test's own output (package lines,
// a failed test's whole output), one line per skipped test with its
// reason, and a time record per top-level test and package.
func TestFilter(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"m/a","Test":"TestOK"}`,
		`{"Action":"output","Package":"m/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}`,
		`{"Action":"pass","Package":"m/a","Test":"TestOK","Elapsed":1.5}`,
		`{"Action":"output","Package":"m/a","Test":"TestBad","Output":"    bad_test.go:9: boom\n"}`,
		`{"Action":"fail","Package":"m/a","Test":"TestBad","Elapsed":0.25}`,
		`{"Action":"output","Package":"m/a","Test":"TestBad/sub","Output":"x\n"}`,
		`{"Action":"pass","Package":"m/a","Test":"TestBad/sub","Elapsed":0.1}`,
		`{"Action":"output","Package":"m/a","Test":"TestRoot","Output":"    lab_test.go:3: needs root (network namespaces)\n"}`,
		`{"Action":"skip","Package":"m/a","Test":"TestRoot","Elapsed":0}`,
		`{"Action":"output","Package":"m/a","Output":"FAIL\tm/a\t2.000s\n"}`,
		`{"Action":"fail","Package":"m/a","Elapsed":2}`,
		`not json: a build line`,
	}, "\n")
	dir := t.TempDir()
	skips, times := filepath.Join(dir, "skips"), filepath.Join(dir, "times")
	var out bytes.Buffer
	if err := filter(strings.NewReader(in), &out, skips, times); err != nil {
		t.Fatal(err)
	}
	if want := "    bad_test.go:9: boom\nFAIL\tm/a\t2.000s\nnot json: a build line\n"; out.String() != want {
		t.Errorf("output:\n%q\nwant\n%q", out.String(), want)
	}
	if b, _ := os.ReadFile(skips); string(b) != "m/a TestRoot: lab_test.go:3: needs root (network namespaces)\n" {
		t.Errorf("skips: %q", b)
	}
	recs, err := readRecords([]string{times})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(recs); got != 3 || recs[0] != (record{"test", "m/a", "TestOK", 1.5}) || recs[2] != (record{"package", "m/a", "", 2}) {
		t.Errorf("times: %+v", recs)
	}
	var top1 bytes.Buffer
	top(&top1, append(recs, record{"fuzz", "github.com/anysched/anysched/internal/x", "FuzzX", 12}), 1)
	if want := "slowest tests:\n      1.5s  m/a TestOK\nslowest test packages (wall time of the package's binary):\n      2.0s  m/a\nslowest fuzz targets (build and run):\n     12.0s  internal/x FuzzX\n"; top1.String() != want {
		t.Errorf("top:\n%s\nwant\n%s", top1.String(), want)
	}
}

// TestStartsGoroutines: a go statement or a Go method call counts; a
// package without either does not.
func TestStartsGoroutines(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"stmt.go":  "package p\nfunc f() { go f() }\n",
		"group.go": "package p\ntype g struct{}\nfunc (g) Go(func() error) {}\nfunc h() { var x g; x.Go(nil) }\n",
		"none.go":  "package p\nfunc n() { gofmt := 1; _ = gofmt }\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		file string
		want bool
	}{{"stmt.go", true}, {"group.go", true}, {"none.go", false}} {
		if got, err := startsGoroutines(dir, []string{c.file}); err != nil || got != c.want {
			t.Errorf("%s: %v %v, want %v", c.file, got, err, c.want)
		}
	}
}
