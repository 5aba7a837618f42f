// Command testreport is make test's bookkeeper (scripts/test.sh): it turns
// `go test -json` back into what a plain `go test` prints, records where the
// time went, and lists the packages the race detector must cover.
//
//	go test -json ... | testreport filter [-skips F] [-times F]
//	    prints the package lines and the whole output of failed tests and of
//	    build failures; appends "package test: reason" per skipped test to F
//	    (-skips: CI's clean root fails when a test skips for want of a tool)
//	    and "test|package<TAB>package<TAB>test<TAB>seconds" records to -times
//	testreport top [-n 10] TIMES...
//	    the n slowest tests, packages and fuzz targets of those records
//	    (fuzz records, "fuzz<TAB>package<TAB>target<TAB>seconds", come from
//	    scripts/fuzz-all.sh)
//	testreport race-packages [PATTERN...]
//	    the packages with tests whose own code starts goroutines (a go
//	    statement, or a call of a method named Go: errgroup, WaitGroup.Go),
//	    in their tests or not, less those excused in raceExcused with reason
//
// It uses the standard library only, so that it builds before anything else.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: testreport filter|top|race-packages [flags]")
	}
	fs := flag.NewFlagSet("testreport "+args[0], flag.ContinueOnError)
	switch args[0] {
	case "filter":
		skips := fs.String("skips", "", "append one line per skipped test to this file")
		times := fs.String("times", "", "append one record per test and package to this file")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return filter(stdin, stdout, *skips, *times)
	case "top":
		n := fs.Int("n", 10, "how many of each kind")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		recs, err := readRecords(fs.Args())
		if err != nil {
			return err
		}
		top(stdout, recs, *n)
		return nil
	case "race-packages":
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		pkgs, err := racePackages(fs.Args())
		if err != nil {
			return err
		}
		for _, p := range pkgs {
			fmt.Fprintln(stdout, p)
		}
		return nil
	}
	return fmt.Errorf("unknown command %q: filter, top or race-packages", args[0])
}

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

// filter reads go test -json and prints what go test without -json prints.
func filter(in io.Reader, stdout io.Writer, skipsPath, timesPath string) error {
	skips, err := appendTo(skipsPath)
	if err != nil {
		return err
	}
	defer skips.Close()
	times, err := appendTo(timesPath)
	if err != nil {
		return err
	}
	defer times.Close()
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	buf := map[string][]string{} // package+test -> its output so far
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(out, sc.Text()) // not an event (go vet, a build line): pass it on
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Test == "":
			if e.Action == "output" && e.Output != "PASS\n" && !strings.HasPrefix(e.Output, "=== ") {
				fmt.Fprint(out, e.Output)
			}
			if (e.Action == "pass" || e.Action == "fail") && e.Elapsed > 0 {
				fmt.Fprintf(times, "package\t%s\t\t%.2f\n", e.Package, e.Elapsed)
			}
		case e.Action == "output":
			buf[key] = append(buf[key], e.Output)
		case e.Action == "fail":
			for _, l := range buf[key] {
				fmt.Fprint(out, l)
			}
			delete(buf, key)
			recordTest(times, e)
		case e.Action == "skip":
			fmt.Fprintf(skips, "%s %s: %s\n", e.Package, e.Test, skipReason(buf[key]))
			delete(buf, key)
		case e.Action == "pass":
			delete(buf, key)
			recordTest(times, e)
		}
		out.Flush()
	}
	return sc.Err()
}

// appendTo opens path for appending (both lanes of make test append to the
// same files; short O_APPEND writes do not interleave), or discards for "".
func appendTo(path string) (io.WriteCloser, error) {
	if path == "" {
		return nopCloser{io.Discard}, nil
	}
	return os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// recordTest writes a top-level test's time (subtests are inside theirs).
func recordTest(w io.Writer, e event) {
	if !strings.Contains(e.Test, "/") {
		fmt.Fprintf(w, "test\t%s\t%s\t%.2f\n", e.Package, e.Test, e.Elapsed)
	}
}

func skipReason(lines []string) string {
	var reason []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		reason = append(reason, t)
	}
	return strings.Join(reason, " | ")
}

type record struct {
	kind, pkg, name string
	seconds         float64
}

func readRecords(paths []string) ([]record, error) {
	var recs []record
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if line == "" {
				continue
			}
			f := strings.Split(line, "\t")
			if len(f) != 4 {
				return nil, fmt.Errorf("%s:%d: want 4 tab-separated fields, got %q", p, i+1, line)
			}
			s, err := strconv.ParseFloat(f[3], 64)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: seconds: %w", p, i+1, err)
			}
			recs = append(recs, record{f[0], f[1], f[2], s})
		}
	}
	return recs, nil
}

func top(w io.Writer, recs []record, n int) {
	for _, kind := range []struct{ name, title string }{
		{"test", "slowest tests"}, {"package", "slowest test packages (wall time of the package's binary)"}, {"fuzz", "slowest fuzz targets (build and run)"},
	} {
		var of []record
		for _, r := range recs {
			if r.kind == kind.name {
				of = append(of, r)
			}
		}
		if len(of) == 0 {
			continue
		}
		sort.SliceStable(of, func(i, j int) bool { return of[i].seconds > of[j].seconds })
		fmt.Fprintf(w, "%s:\n", kind.title)
		for _, r := range of[:min(n, len(of))] {
			name := strings.TrimPrefix(r.pkg, modulePrefix(r.pkg))
			if r.name != "" {
				name += " " + r.name
			}
			fmt.Fprintf(w, "  %7.1fs  %s\n", r.seconds, name)
		}
	}
}

// modulePrefix is the part of a package path the report leaves out: the
// module's path and its slash.
func modulePrefix(pkg string) string {
	const mod = "github.com/anysched/anysched/"
	if strings.HasPrefix(pkg, mod) {
		return mod
	}
	return ""
}

// raceExcused are packages that start goroutines but whose race run would
// find nothing its plain run and the other packages' race runs do not: each
// with its reason. Everything else that runs goroutines is raced.
var raceExcused = map[string]string{
	"github.com/anysched/anysched/internal/testbed/lab": "its tests drive the daemons as processes in network namespaces " +
		"(the daemons' code is raced in its own packages); in-process it runs only the harness's STB load loops",
	// The benchmark harnesses' goroutines are their load loops and process
	// supervision; the product code they drive is raced in its own
	// packages, and their tests check flags and reports.
	"github.com/anysched/anysched/bench/etcdload":  "a benchmark harness: its load loops drive product code raced in its own packages",
	"github.com/anysched/anysched/bench/frontends": "a benchmark harness: it supervises front ends as processes",
	"github.com/anysched/anysched/bench/province":  "a benchmark harness: it supervises the daemons as processes",
	"github.com/anysched/anysched/bench/rollout":   "a benchmark harness: it supervises the daemons as processes",
}

// racePackages lists the packages (of the patterns, default ./...) that have
// tests and whose code starts goroutines, less raceExcused.
func racePackages(patterns []string) ([]string, error) {
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Dir,GoFiles,TestGoFiles,XTestGoFiles"}, patterns...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []string
	for dec.More() {
		var p struct {
			ImportPath, Dir                    string
			GoFiles, TestGoFiles, XTestGoFiles []string
		}
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
		if len(p.TestGoFiles)+len(p.XTestGoFiles) == 0 {
			continue
		}
		if _, ok := raceExcused[p.ImportPath]; ok {
			continue
		}
		yes, err := startsGoroutines(p.Dir, slices.Concat(p.GoFiles, p.TestGoFiles, p.XTestGoFiles))
		if err != nil {
			return nil, err
		}
		if yes {
			pkgs = append(pkgs, p.ImportPath)
		}
	}
	return pkgs, nil
}

// startsGoroutines reports whether any of the files has a go statement or
// calls a method named Go (errgroup.Group.Go, sync.WaitGroup.Go).
func startsGoroutines(dir string, files []string) (bool, error) {
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return false, err
		}
		found := false
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				found = true
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Go" {
					found = true
				}
			}
			return !found
		})
		if found {
			return true, nil
		}
	}
	return false, nil
}
