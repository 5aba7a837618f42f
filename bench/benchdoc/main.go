// Command benchdoc turns `go test -bench` output into the markdown tables of
// docs/benchmarks.md. A benchmark named X_Baseline is the baseline of X,
// measured in the same run on the same machine; each row shows its ratio to
// its baseline, which is what the documented targets are stated in.
//
//	go test -run '^$' -bench . -benchmem ./... | go run ./bench/benchdoc -doc docs/benchmarks.md
//
// The tables replace whatever stands between the markers
// <!-- bench:begin --> and <!-- bench:end --> in the document.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

type result struct {
	pkg     string
	name    string
	nsOp    float64
	bOp     float64
	allocs  float64
	metrics []string // custom b.ReportMetric figures, as printed
}

var line = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

func main() {
	doc := flag.String("doc", "docs/benchmarks.md", "document whose marked section is replaced")
	flag.Parse()
	if err := run(os.Stdin, *doc); err != nil {
		fmt.Fprintln(os.Stderr, "benchdoc:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, doc string) error {
	var results []result
	var machine []string
	pkg := ""
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "pkg: "):
			pkg = strings.TrimPrefix(l, "pkg: ")
		case strings.HasPrefix(l, "cpu: "), strings.HasPrefix(l, "goos: "), strings.HasPrefix(l, "goarch: "):
			if !contains(machine, l) {
				machine = append(machine, l)
			}
		}
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		r := result{pkg: pkg, name: strings.TrimPrefix(m[1], "Benchmark")}
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				r.nsOp = v
			case "B/op":
				r.bOp = v
			case "allocs/op":
				r.allocs = v
			case "MB/s":
			default:
				r.metrics = append(r.metrics, f[i]+" "+f[i+1])
			}
		}
		results = append(results, r)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(results) == 0 {
		return fmt.Errorf("no benchmark results on standard input")
	}
	base := map[string]result{}
	for _, r := range results {
		if n, ok := strings.CutSuffix(r.name, "_Baseline"); ok {
			base[r.pkg+"."+n] = r
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s on: %s; Go %s.\n\n", time.Now().UTC().Format("2006-01-02"), strings.Join(machine, ", "), goVersion())
	cur := ""
	for _, r := range results {
		if strings.HasSuffix(r.name, "_Baseline") {
			continue
		}
		if r.pkg != cur {
			cur = r.pkg
			fmt.Fprintf(&b, "\n**%s**\n\n| benchmark | time/op | B/op | allocs/op | baseline time/op | ratio to baseline | other |\n|---|---|---|---|---|---|---|\n", strings.TrimPrefix(cur, "github.com/anysched/anysched/"))
		}
		bl, ratio := "", ""
		if br, ok := base[r.pkg+"."+r.name]; ok && br.nsOp > 0 {
			bl = dur(br.nsOp)
			ratio = fmt.Sprintf("%.2f", r.nsOp/br.nsOp)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %s | %s | %s |\n", r.name, dur(r.nsOp), bytesStr(r.bOp), r.allocs, bl, ratio, strings.Join(r.metrics, ", "))
	}
	old, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	const begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
	i, j := bytes.Index(old, []byte(begin)), bytes.Index(old, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s ... %s section", doc, begin, end)
	}
	var out bytes.Buffer
	out.Write(old[:i+len(begin)])
	out.WriteString("\n" + b.String() + "\n")
	out.Write(old[j:])
	return os.WriteFile(doc, out.Bytes(), 0o644)
}

func dur(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.2f s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.1f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.2f µs", ns/1e3)
	default:
		return fmt.Sprintf("%.0f ns", ns)
	}
}

func bytesStr(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", b)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func goVersion() string { return strings.TrimPrefix(runtime.Version(), "go") }
