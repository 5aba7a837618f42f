package docs_test

import (
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/wiring/config"
	"github.com/anysched/anysched/internal/wiring/daemon"
)

// docFiles are the documents whose names are checked against the code.
var docFiles = []string{"operations.md", "security.md", "design.md", "capacity.md", "../README.md", "../deploy/examples/loopback/README.md"}

// reference is where every configuration key and metric must be named.
var reference = []string{"operations.md", "security.md"}

// notConfigKeys are dotted names in the documents that look like
// configuration keys but are not, with the reason.
var notConfigKeys = map[string]string{
	"health.url":     "a server's probe URL in the topology (servers[].health.url)",
	"alloc.model.*":  "the model overrides, listed in docs/design.md",
	"alloc.period/2": "a value, not a key",
	"alloc.aud":      "the token claim aud, named in prose after alloc.token_issuer",
}

// undocumentedMetrics are metrics the code registers that the reference
// deliberately does not list, with the reason.
var undocumentedMetrics = map[string]string{}

func read(t *testing.T, names ...string) string {
	t.Helper()
	var b strings.Builder
	for _, n := range names {
		d, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(d)
		b.WriteByte('\n')
	}
	return b.String()
}

// yamlKeys adds the dotted key paths of v's type to keys (slices as their
// element's keys, maps and scalars as leaves).
func yamlKeys(typ reflect.Type, prefix string, keys map[string]bool) {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct || typ.PkgPath() == "time" || typ.PkgPath() == "net/netip" {
		return
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if strings.Contains(opts, "inline") {
			yamlKeys(f.Type, prefix, keys)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		keys[prefix+name] = true
		yamlKeys(f.Type, prefix+name+".", keys)
	}
}

// configKeys is every configuration key of the three daemons.
func configKeys() map[string]bool {
	keys := map[string]bool{}
	for _, v := range []any{config.DefaultCenter(), config.DefaultRegional(), config.DefaultChecker()} {
		yamlKeys(reflect.TypeOf(v), "", keys)
	}
	return keys
}

var (
	backticked = regexp.MustCompile("`([^`\n]+)`")
	dottedKey  = regexp.MustCompile(`^[a-z][a-z0-9_]*(\[\])?(\.([a-z][a-z0-9_]*(\[\])?|\*))+$`)
	plainKey   = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	metricName = regexp.MustCompile(`\banysched_[a-z0-9_]*[a-z0-9]\b`)
	headerName = regexp.MustCompile(`\b(X-Anysched-[A-Za-z]+|Server-Timing)\b`)
)

// docKeys returns the configuration keys a document names: every dotted
// backticked token whose first part is a top-level key, and the plain
// tokens that follow a dotted one in the same line (`etcd.tls.ca_file`,
// `cert_file`: etcd.tls.cert_file), as the key tables write them.
func docKeys(doc string, top map[string]bool) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(doc, "\n") {
		prefix, end := "", 0
		for _, m := range backticked.FindAllStringSubmatchIndex(line, -1) {
			between := line[end:m[0]]
			end = m[1]
			tok, _, _ := strings.Cut(line[m[2]:m[3]], ":") // `announce.mode: none`
			tok = strings.TrimSpace(tok)
			first := strings.TrimSuffix(strings.Split(tok, ".")[0], "[]")
			switch {
			case dottedKey.MatchString(tok) && top[first] && !fileName.MatchString(tok):
				tok = strings.ReplaceAll(tok, "[]", "")
				out[tok] = true
				prefix = tok[:strings.LastIndex(tok, ".")+1]
			case prefix != "" && listSep.MatchString(between) && (plainKey.MatchString(tok) || dottedKey.MatchString(tok)):
				out[prefix+strings.ReplaceAll(tok, "[]", "")] = true
			default:
				prefix = ""
			}
		}
	}
	return out
}

// fileName is a file named in backticks (announce.go), not a key.
var fileName = regexp.MustCompile(`\.(go|ya?ml|md|conf|json|csv|txt|service|timer|pub|key|crt)$`)

// listSep is what separates the keys of one list in a line.
var listSep = regexp.MustCompile(`^\s*(,|/|and|or|, and|, or)?\s*$`)

// TestConfigKeysDocumented: every key the documents name exists, and every
// key of the three daemons is named in operations.md or security.md.
func TestConfigKeysDocumented(t *testing.T) {
	keys := configKeys()
	top := map[string]bool{}
	for k := range keys {
		if !strings.Contains(k, ".") {
			top[k] = true
		}
	}
	topo := map[string]bool{}
	yamlKeys(reflect.TypeOf(topology.Topology{}), "", topo)
	for _, name := range docFiles {
		for k := range docKeys(read(t, name), top) {
			if keys[k] || notConfigKeys[k] != "" {
				continue
			}
			if strings.HasSuffix(k, ".*") && anyPrefix(keys, strings.TrimSuffix(k, "*")) {
				continue
			}
			if topoKey(topo, k) {
				continue // a topology key with a config key's first part (anycast.service_ip)
			}
			t.Errorf("%s names the configuration key `%s`, which no daemon has", name, k)
		}
	}
	ref := read(t, reference...)
	named := docKeys(ref, top)
	for k := range keys {
		if anyPrefix(keys, k+".") {
			continue // a section: its keys are checked
		}
		if named[k] || anyNamedParent(named, k) || namedBeside(ref, k) {
			continue
		}
		if !strings.Contains(k, ".") && strings.Contains(ref, "`"+k+"`") {
			continue
		}
		t.Errorf("configuration key %s is named in neither operations.md nor security.md", k)
	}
}

func anyPrefix(keys map[string]bool, p string) bool {
	for k := range keys {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// anyNamedParent: a key under a documented section written as `x.*` or
// documented by its section alone where the section is a list of the
// same fields as another (alloc.model.* covers alloc.model.a).
func anyNamedParent(named map[string]bool, k string) bool {
	for i := strings.LastIndex(k, "."); i > 0; i = strings.LastIndex(k[:i], ".") {
		if named[k[:i]+".*"] {
			return true
		}
	}
	return false
}

// namedBeside: a line of doc names k's parent (`parent` or `parent[]`) and
// k's last part, as a table row gives a list's or a map's fields:
// `announce.bgp.peers[]` | `address`, `port` (179), ...
func namedBeside(doc, k string) bool {
	i := strings.LastIndex(k, ".")
	if i < 0 {
		return false
	}
	parent, leaf := k[:i], regexp.MustCompile(`\b`+regexp.QuoteMeta(k[i+1:])+`\b`)
	for _, line := range strings.Split(doc, "\n") {
		if (strings.Contains(line, "`"+parent+"`") || strings.Contains(line, "`"+parent+"[]`")) && leaf.MatchString(line) {
			return true
		}
	}
	return false
}

// topoKey: k, or k below any list of the topology (nodes[].servers[]...).
func topoKey(topo map[string]bool, k string) bool {
	for t := range topo {
		if t == k || strings.HasSuffix(t, "."+k) {
			return true
		}
	}
	return false
}

// codeMetrics is every metric name the daemons' code registers, found in
// the source: literal names, names built by a helper from a literal prefix
// (g("name") with "anysched_alloc_" + name), and the connection limits'
// pair (prefix_open, prefix_refused_total).
func codeMetrics(t *testing.T) map[string]bool {
	t.Helper()
	lit := regexp.MustCompile(`"(anysched_[a-z0-9_]*)"`)
	helper := regexp.MustCompile(`Name: "(anysched_[a-z0-9_]+_)" \+ name`)
	helperCall := regexp.MustCompile(`\bg\("([a-z0-9_]+)",`)
	limit := regexp.MustCompile(`\.Register\(reg, "(anysched_[a-z0-9_]+)"`)
	out := map[string]bool{}
	err := filepath.WalkDir("../internal", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.Contains(path, "/testbed/") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		src := string(b)
		limits := map[string]bool{}
		for _, m := range limit.FindAllStringSubmatch(src, -1) {
			limits[m[1]] = true
			out[m[1]+"_open"], out[m[1]+"_refused_total"] = true, true
		}
		for _, m := range helper.FindAllStringSubmatch(src, -1) {
			for _, c := range helperCall.FindAllStringSubmatch(src, -1) {
				out[m[1]+c[1]] = true
			}
		}
		for _, m := range lit.FindAllStringSubmatch(src, -1) {
			if !strings.HasSuffix(m[1], "_") && !limits[m[1]] {
				out[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMetricsDocumented: every metric the documents name exists, and every
// metric of the code is named in operations.md or security.md.
func TestMetricsDocumented(t *testing.T) {
	code := codeMetrics(t)
	if len(code) < 30 {
		t.Fatalf("found only %d metrics in the code: the source scan is broken", len(code))
	}
	for _, name := range docFiles {
		for _, m := range metricName.FindAllString(read(t, name), -1) {
			if !code[m] {
				t.Errorf("%s names the metric %s, which no daemon registers", name, m)
			}
		}
	}
	ref := read(t, reference...)
	for _, m := range sorted(code) {
		if undocumentedMetrics[m] == "" && !strings.Contains(ref, m) {
			t.Errorf("metric %s is named in neither operations.md nor security.md", m)
		}
	}
}

// TestHeadersDocumented: the STB answers' headers the documents name are
// the ones internal/stb/httpd sets, and operations.md names all of them.
func TestHeadersDocumented(t *testing.T) {
	files, err := filepath.Glob("../internal/stb/httpd/*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, "_test.go") })
	src := read(t, files...)
	code := map[string]bool{}
	for _, h := range headerName.FindAllString(src, -1) {
		code[h] = true
	}
	if len(code) < 4 {
		t.Fatalf("found only %v in internal/stb/httpd", code)
	}
	for _, name := range docFiles {
		for _, h := range headerName.FindAllString(read(t, name), -1) {
			if !code[h] {
				t.Errorf("%s names the header %s, which the schedulers never send or read", name, h)
			}
		}
	}
	ops := read(t, "operations.md")
	for h := range code {
		if !strings.Contains(ops, "`"+h) {
			t.Errorf("header %s is not named in operations.md", h)
		}
	}
}

// schedctlLine finds a schedctl command in a document's line: the
// command's name and the rest, up to a pipe, redirection or comment.
var schedctlLine = regexp.MustCompile(`\bschedctl((?:\s+--?[a-z][a-z0-9-]*(?:[ =](?:[^\s-][^\s]*))?)*)\s+([a-z][a-z-]*)((?:\s+[^\s|>#;)` + "`" + `]+)*)`)

// TestSchedctlFlagsDocumented: every --flag the documents give a schedctl
// command is one the command (or the global flag set) has, as its --help
// lists it.
func TestSchedctlFlagsDocumented(t *testing.T) {
	helpOf := map[string]string{}
	help := func(cmd string) string {
		if h, ok := helpOf[cmd]; ok {
			return h
		}
		var out strings.Builder
		args := []string{"--help"}
		if cmd != "" {
			args = []string{cmd, "--help"}
			if sub := strings.Fields(cmd); len(sub) == 2 {
				args = []string{sub[0], sub[1], "--help"}
			}
		}
		_ = ctlRun(args, &out)
		helpOf[cmd] = out.String()
		return helpOf[cmd]
	}
	global := help("")
	if !strings.Contains(global, "-server") {
		t.Fatalf("schedctl --help lists no --server:\n%s", global)
	}
	checked := 0
	defer func() {
		if checked < 30 {
			t.Errorf("only %d schedctl commands found in the documents: the pattern is broken", checked)
		}
	}()
	flag := regexp.MustCompile(`(?:^|\s)--([a-z][a-z0-9-]*)`)
	for _, name := range docFiles {
		for _, line := range strings.Split(read(t, name), "\n") {
			for _, m := range schedctlLine.FindAllStringSubmatch(line, -1) {
				cmd, rest := m[2], m[3]
				if cmd == "drill" || cmd == "pki" {
					if f := strings.Fields(rest); len(f) > 0 && !strings.HasPrefix(f[0], "-") {
						cmd += " " + f[0]
					}
				}
				h := help(cmd)
				checked++
				for _, f := range flag.FindAllStringSubmatch(m[1]+" "+rest, -1) {
					if f[1] == "help" {
						continue
					}
					if !strings.Contains(h, "-"+f[1]) && !strings.Contains(global, "-"+f[1]) {
						t.Errorf("%s: `schedctl %s --%s`: no such flag (line: %s)", name, cmd, f[1], strings.TrimSpace(line))
					}
				}
			}
		}
	}
}

func sorted(m map[string]bool) []string {
	var s []string
	for k := range m {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// TestSchedctlDocumentedBothWays: every schedctl command and every flag
// its usage lists is named in the operator's documents (operations.md,
// security.md or the loopback README), so a flag nobody can find does not
// ship.
func TestSchedctlDocumentedBothWays(t *testing.T) {
	var usage strings.Builder
	_ = ctlRun([]string{"--help"}, &usage)
	docs := read(t, "operations.md", "security.md", "../deploy/examples/loopback/README.md")
	flag := regexp.MustCompile(`--[a-z][a-z0-9-]*`)
	lines := 0
	for _, line := range strings.Split(usage.String(), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "schedctl ")
		if !ok {
			continue
		}
		lines++
		rest = strings.TrimPrefix(rest, "[global flags] ")
		cmd, _, _ := strings.Cut(rest, " ")
		if cmd == "help" || cmd == "version" {
			continue
		}
		if !regexp.MustCompile(`schedctl (\[[^]]*\] |--?[a-z-]+ \S+ )*` + regexp.QuoteMeta(cmd) + `\b`).MatchString(docs) {
			t.Errorf("schedctl %s is not shown in the documents", cmd)
		}
		for _, f := range flag.FindAllString(rest, -1) {
			if !regexp.MustCompile(regexp.QuoteMeta(f) + `\b`).MatchString(docs) {
				t.Errorf("schedctl %s %s is not named in the documents", cmd, f)
			}
		}
	}
	if lines < 15 {
		t.Fatalf("only %d usage lines found in schedctl --help:\n%s", lines, usage.String())
	}
	for _, f := range flag.FindAllString(usage.String()[strings.Index(usage.String(), "Global flags"):], -1) {
		if !strings.Contains(docs, f) {
			t.Errorf("global flag %s is not named in the documents", f)
		}
	}
}

// TestDaemonFlagsDocumented: every flag of the three daemons is named in
// operations.md, and every daemon flag operations.md gives a daemon's
// command line exists.
func TestDaemonFlagsDocumented(t *testing.T) {
	ops := read(t, "operations.md")
	center, regional, checker := config.DefaultCenter(), config.DefaultRegional(), config.DefaultChecker()
	cf, _ := daemon.Center(&center, io.Discard)
	rf, _ := daemon.Regional(&regional, io.Discard)
	all := map[string]bool{}
	for _, f := range []*daemon.Flags{cf, rf, daemon.Checker(&checker, io.Discard)} {
		f.VisitAll(func(fl *flag.Flag) { all[fl.Name] = true })
	}
	if len(all) < len(daemon.CommonFlags()) {
		t.Fatalf("only %v found", all)
	}
	for name := range all {
		if !regexp.MustCompile(`--` + regexp.QuoteMeta(name) + `\b`).MatchString(ops) {
			t.Errorf("daemon flag --%s is not named in operations.md", name)
		}
	}
	line := regexp.MustCompile(`(?:central-scheduler|regional-scheduler|healthcheck)((?:\s+--?[a-z][a-z0-9-]*(?:[ =][^\s-]\S*)?)+)`)
	for _, m := range line.FindAllStringSubmatch(ops, -1) {
		for _, f := range regexp.MustCompile(`--([a-z][a-z0-9-]*)`).FindAllStringSubmatch(m[1], -1) {
			if !all[f[1]] && f[1] != "help" {
				t.Errorf("operations.md gives a daemon --%s, which none has: %s", f[1], strings.TrimSpace(m[0]))
			}
		}
	}
}
