package yamlstrict_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/wiring/yamlstrict"
	"gopkg.in/yaml.v3"
)

type timeouts struct {
	Read  time.Duration `yaml:"read"`
	Write time.Duration `yaml:"write"`
}

type item struct {
	B    int      `yaml:"b"`
	Tags []string `yaml:"tags"`
}

type Common struct {
	Owner string `yaml:"owner"`
}

// hidden is embedded unexported; yaml.v3 still inlines its fields.
type hidden struct {
	Secret string `yaml:"secret"`
}

type config struct {
	Common      `yaml:",inline"`
	Name        string           `yaml:"name"`
	Port        int              `yaml:"port"`
	Ratio       float64          `yaml:"ratio"`
	Enabled     bool             `yaml:"enabled"`
	ReadTimeout time.Duration    `yaml:"read_timeout"`
	Timeouts    timeouts         `yaml:"timeouts"`
	Items       []item           `yaml:"items"`
	Matrix      [][]int          `yaml:"matrix"`
	Limits      map[string]int   `yaml:"limits"`
	Subs        map[string]item  `yaml:"subs"`
	Ptr         *timeouts        `yaml:"ptr"`
	Level       level            `yaml:"level"`
	Untagged    string           // key "untagged"
	Skipped     string           `yaml:"-"`
	ByID        map[int]string   `yaml:"by_id"`
	Nested      map[string][]int `yaml:"nested"`
}

// level implements yaml.Unmarshaler: only "low" and "high" are accepted.
type level string

func (l *level) UnmarshalYAML(n *yaml.Node) error {
	if n.Value != "low" && n.Value != "high" {
		return fmt.Errorf("level %q is neither low nor high", n.Value)
	}
	*l = level(n.Value)
	return nil
}

func decode(t *testing.T, doc string) (config, yamlstrict.Errors) {
	t.Helper()
	c := config{Name: "default", Port: 80, ReadTimeout: time.Second}
	err := yamlstrict.Decode([]byte(doc), &c)
	if err == nil {
		return c, nil
	}
	errs, ok := yamlstrict.AsErrors(err)
	if !ok {
		t.Fatalf("Decode error %v (%T) carries no field errors", err, err)
	}
	return c, errs
}

func TestDecodeValid(t *testing.T) {
	c, errs := decode(t, `
owner: ops
name: edge
port: 8080
ratio: 0.5
enabled: true
read_timeout: 3s
timeouts: {read: 1m30s, write: 250ms}
items:
  - b: 1
    tags: [x, y]
  - b: 2
matrix: [[1, 2], [3]]
limits: {a: 1, b: 2}
subs:
  one: {b: 7}
ptr: {read: 2s}
level: high
untagged: yes-it-is
by_id: {1: one, 2: two}
nested: {a: [1, 2]}
`)
	if errs != nil {
		t.Fatal(errs)
	}
	got := fmt.Sprintf("%+v", c)
	want := "{Common:{Owner:ops} Name:edge Port:8080 Ratio:0.5 Enabled:true ReadTimeout:3s Timeouts:{Read:1m30s Write:250ms} " +
		"Items:[{B:1 Tags:[x y]} {B:2 Tags:[]}] Matrix:[[1 2] [3]] Limits:map[a:1 b:2] Subs:map[one:{B:7 Tags:[]}] Ptr:0x"
	if !strings.HasPrefix(got, want) {
		t.Errorf("decoded\n%s\nwant prefix\n%s", got, want)
	}
	if c.Ptr == nil || c.Ptr.Read != 2*time.Second || c.Level != "high" || c.Untagged != "yes-it-is" ||
		c.ByID[2] != "two" || len(c.Nested["a"]) != 2 {
		t.Errorf("decoded %+v", c)
	}
}

// expect checks that errs holds exactly one error per want entry, in order:
// each entry is "path: message substring".
func expect(t *testing.T, errs yamlstrict.Errors, want ...string) {
	t.Helper()
	if len(errs) != len(want) {
		t.Fatalf("%d errors, want %d:\n%v", len(errs), len(want), errs)
	}
	for i, w := range want {
		path, msg, _ := strings.Cut(w, ": ")
		if errs[i].Path != path || !strings.Contains(errs[i].Msg, msg) {
			t.Errorf("error %d = %q at %q; want %q containing %q", i, errs[i].Msg, errs[i].Path, path, msg)
		}
	}
}

func TestDuplicateKeys(t *testing.T) {
	_, errs := decode(t, "name: a\nport: 1\nname: b\n")
	expect(t, errs, "name: key given twice")
	if errs[0].Line != 3 {
		t.Errorf("line = %d, want 3 (the second occurrence)", errs[0].Line)
	}
	_, errs = decode(t, "items: [{b: 1}, {b: 2, b: 3}]\ntimeouts: {read: 1s, read: 2s}\n")
	expect(t, errs, "items[1].b: key given twice", "timeouts.read: key given twice")
}

func TestUnknownFields(t *testing.T) {
	_, errs := decode(t, "read-timeout: 3s\nreadTimeout: 3s\nReadTimeout: 3s\nREAD_TIMEOUT: 1s\nbogus: 1\nskipped: x\nitems: [{b: 1, c: 2}]\n")
	expect(t, errs,
		`read-timeout: unknown field (did you mean "read_timeout"?)`,
		`readTimeout: unknown field (did you mean "read_timeout"?)`,
		`ReadTimeout: unknown field (did you mean "read_timeout"?)`,
		`READ_TIMEOUT: unknown field (did you mean "read_timeout"?)`,
		"bogus: unknown field",
		"skipped: unknown field", // yaml:"-" fields are not part of the document
		"items[0].c: unknown field",
	)
	if strings.Contains(errs[4].Msg, "did you mean") {
		t.Errorf("suggestion for an unrelated key: %q", errs[4].Msg)
	}
}

func TestNullLeavesDefault(t *testing.T) {
	for _, doc := range []string{"name: null\nport: ~\nread_timeout:\n", "name: ~\nport: null\nread_timeout: ~\ntimeouts: ~\n"} {
		c, errs := decode(t, doc)
		if errs != nil {
			t.Fatalf("%q: %v", doc, errs)
		}
		if c.Name != "default" || c.Port != 80 || c.ReadTimeout != time.Second {
			t.Errorf("%q: decoded %+v; nulls must keep the defaults", doc, c)
		}
	}
	// a null list element or document is not an error either
	if _, errs := decode(t, "items: [~, {b: 1}]\n"); errs != nil {
		t.Errorf("null list element: %v", errs)
	}
}

// TestNullLeavesPointerDefault: yamlstrict says null leaves the default in
// place, but yaml.v3 itself sets pointer, slice and map fields to nil on null.
func TestNullLeavesPointerDefault(t *testing.T) {
	c := config{Ptr: &timeouts{Read: time.Second}, Limits: map[string]int{"a": 1}, Items: []item{{B: 1}}}
	if err := yamlstrict.Decode([]byte("ptr: ~\nlimits: ~\nitems: ~\n"), &c); err != nil {
		t.Fatal(err)
	}
	if c.Ptr == nil || c.Limits == nil || c.Items == nil {
		t.Fatalf("null resets pointer/map/slice defaults to nil: ptr=%v limits=%v items=%v", c.Ptr, c.Limits, c.Items)
	}
}

func TestDurations(t *testing.T) {
	c, errs := decode(t, "read_timeout: 3s\ntimeouts: {read: 1h2m, write: 0s}\n")
	if errs != nil {
		t.Fatal(errs)
	}
	if c.ReadTimeout != 3*time.Second || c.Timeouts.Read != time.Hour+2*time.Minute || c.Timeouts.Write != 0 {
		t.Errorf("durations = %v %v %v", c.ReadTimeout, c.Timeouts.Read, c.Timeouts.Write)
	}
	_, errs = decode(t, "read_timeout: bogus\ntimeouts: {read: 3 seconds, write: [1s]}\nptr: {read: 5}\n")
	expect(t, errs,
		"read_timeout: invalid value: cannot unmarshal !!str `bogus` into time.Duration",
		"timeouts.read: invalid value",
		"timeouts.write: expected a single value, found a list",
		"ptr.read: invalid value: cannot unmarshal !!int `5` into time.Duration", // a bare number has no unit
	)
	if errs[1].Line != 2 {
		t.Errorf("line of timeouts.read = %d, want 2", errs[1].Line)
	}
}

func TestMaps(t *testing.T) {
	_, errs := decode(t, "limits: {a: 1, b: x, c: [1]}\nsubs: {one: {b: 1, zz: 2}, two: 3}\nnested: {k: [1, y]}\n")
	expect(t, errs,
		"limits.b: invalid value",
		"limits.c: expected a single value, found a list",
		"subs.one.zz: unknown field",
		`subs.two: expected a mapping, found "3"`,
		"nested.k[1]: invalid value",
	)
	_, errs = decode(t, "limits: [1, 2]\n")
	expect(t, errs, "limits: expected a mapping, found a list")
}

// TestMapKeys: keys of a map field must be checked like values, with a path.
func TestMapKeys(t *testing.T) {
	_, errs := decode(t, "by_id: {1: one, x: two}\n")
	if len(errs) == 1 && errs[0].Path == "" {
		t.Fatalf("map keys are not checked, the error has no path: %v", errs)
	}
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Path, "by_id") {
		t.Errorf("errors %v, want one under by_id", errs)
	}
}

// TestUnexportedInline: yaml.v3 inlines the fields of an unexported embedded
// struct tagged ",inline"; the strict check must know them too.
func TestUnexportedInline(t *testing.T) {
	type withHidden struct {
		hidden `yaml:",inline"`
		Name   string `yaml:"name"`
	}
	var v withHidden
	err := yamlstrict.Decode([]byte("name: a\nsecret: b\n"), &v)
	if errs, _ := yamlstrict.AsErrors(err); len(errs) == 1 && errs[0].Path == "secret" {
		t.Fatalf("fields of an unexported inline struct are unknown: %v", err)
	}
	if err != nil || v.Secret != "b" {
		t.Errorf("Decode = %v, secret %q", err, v.Secret)
	}
}

// TestFractionalInteger: yaml.v3 truncates 1.5 to 1 for an int field; a
// strict decoder must refuse it instead.
func TestFractionalInteger(t *testing.T) {
	c, errs := decode(t, "port: 80.5\n")
	if errs == nil {
		t.Fatalf("port: 80.5 decodes silently as %d", c.Port)
	}
	expect(t, errs, "port: invalid value")
}

func TestPaths(t *testing.T) {
	_, errs := decode(t, `
items:
  - b: 1
  - b: x
    tags: [a, [b]]
matrix: [[1], [2, z]]
ptr: {read: nope}
`)
	expect(t, errs,
		"items[1].b: invalid value",
		"items[1].tags[1]: expected a single value, found a list",
		"matrix[1][1]: invalid value",
		"ptr.read: invalid value",
	)
	if got := errs[0].Error(); got != "items[1].b: invalid value: cannot unmarshal !!str `x` into int (line 4)" {
		t.Errorf("Error() = %q", got)
	}
}

func TestWrongKinds(t *testing.T) {
	_, errs := decode(t, "name: {a: 1}\ntimeouts: 5\nitems: {b: 1}\nport: [1]\nenabled: maybe\nratio: fast\n")
	expect(t, errs,
		"name: expected a single value, found a mapping",
		`timeouts: expected a mapping, found "5"`,
		"items: expected a list, found a mapping",
		"port: expected a single value, found a list",
		"enabled: invalid value",
		"ratio: invalid value",
	)
}

func TestUnmarshalerIsProbed(t *testing.T) {
	_, errs := decode(t, "level: medium\n")
	expect(t, errs, `level: invalid value: level "medium" is neither low nor high`)
}

// code is a number written as "A-B" (a TextUnmarshaler over an integer kind).
type code uint32

func (c *code) UnmarshalText(b []byte) error {
	hi, lo, ok := strings.Cut(string(b), "-")
	h, err1 := strconv.ParseUint(hi, 10, 16)
	l, err2 := strconv.ParseUint(lo, 10, 16)
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("%q is not A-B", b)
	}
	*c = code(h<<16 | l)
	return nil
}

type texts struct {
	Addr   netip.Addr            `yaml:"addr"`
	Prefix netip.Prefix          `yaml:"prefix"`
	Peers  []netip.Addr          `yaml:"peers"`
	Codes  []code                `yaml:"codes"`
	ByAddr map[netip.Addr]string `yaml:"by_addr"`
	Ptr    *netip.Addr           `yaml:"ptr"`
}

// TestTextUnmarshalers: fields with an UnmarshalText (netip types, typed
// names) decode from one scalar; their parse errors carry path and line.
func TestTextUnmarshalers(t *testing.T) {
	var v texts
	err := yamlstrict.Decode([]byte("addr: 10.0.0.1\nprefix: 10.0.0.0/26\npeers: [192.0.2.1, \"2001:db8::1\"]\ncodes: [65101-100]\nby_addr: {10.1.0.1: a}\nptr: ::1\n"), &v)
	if err != nil {
		t.Fatal(err)
	}
	if v.Addr != netip.MustParseAddr("10.0.0.1") || v.Prefix != netip.MustParsePrefix("10.0.0.0/26") || len(v.Peers) != 2 || v.Peers[1] != netip.MustParseAddr("2001:db8::1") ||
		len(v.Codes) != 1 || v.Codes[0] != 65101<<16|100 || v.ByAddr[netip.MustParseAddr("10.1.0.1")] != "a" || v.Ptr == nil || *v.Ptr != netip.IPv6Loopback() {
		t.Fatalf("decoded %+v", v)
	}

	doc := "addr: 10.0.0.300\nprefix: 10.0.0.0\npeers: [192.0.2.1, nowhere]\ncodes: [65101-100, 7]\nby_addr: {x: a}\nptr: {a: 1}\n"
	err = yamlstrict.Decode([]byte(doc), &v)
	errs, ok := yamlstrict.AsErrors(err)
	if !ok {
		t.Fatalf("Decode = %v, want field errors", err)
	}
	expect(t, errs,
		`addr: invalid value: ParseAddr("10.0.0.300")`,
		`prefix: invalid value: netip.ParsePrefix("10.0.0.0"): no '/'`,
		`peers[1]: invalid value: ParseAddr("nowhere")`,
		`codes[1]: invalid value: "7" is not A-B`,
		`by_addr.x: invalid value: ParseAddr("x")`,
		"ptr: expected a single value, found a mapping",
	)
	for i, line := range []int{1, 2, 3, 4, 5, 6} {
		if errs[i].Line != line {
			t.Errorf("%s: line %d, want %d", errs[i].Path, errs[i].Line, line)
		}
	}
	// An integer kind with UnmarshalText is not held to whole numbers.
	if err := yamlstrict.Decode([]byte("codes: [1.5]\n"), &v); err == nil || !strings.Contains(err.Error(), `codes[0]: invalid value: "1.5" is not A-B (line 1)`) {
		t.Errorf("fractional text value: %v", err)
	}
}

func TestDocumentLevel(t *testing.T) {
	for _, tc := range []struct{ doc, msg string }{
		{"", "document is empty"},
		{"# just a comment\n", "document is empty"},
		{"name: a\n---\nname: b\n", "more than one YAML document"},
		{"name: [\n", "not valid YAML"},
		{"- a\n", "expected a mapping, found a list"},
		{"just text\n", `expected a mapping, found "just text"`},
	} {
		_, errs := decode(t, tc.doc)
		if len(errs) != 1 || errs[0].Path != "" || !strings.Contains(errs[0].Msg, tc.msg) {
			t.Errorf("%q: %v, want one document error containing %q", tc.doc, errs, tc.msg)
			continue
		}
		if !strings.HasPrefix(errs[0].Error(), "(document): ") {
			t.Errorf("%q: Error() = %q, want the (document) prefix", tc.doc, errs[0].Error())
		}
	}
}

func TestAliases(t *testing.T) {
	_, errs := decode(t, "timeouts: &t {read: 1s}\nptr: *t\nitems: [&i {b: 1}, *i]\n")
	expect(t, errs, "ptr: YAML aliases are not allowed", "items[1]: YAML aliases are not allowed")
	// an anchor alone is harmless
	if _, errs := decode(t, "timeouts: &t {read: 1s}\n"); errs != nil {
		t.Errorf("anchor without alias: %v", errs)
	}
}

func TestNestedTooDeeply(t *testing.T) {
	type tree struct {
		K []tree `yaml:"k"`
	}
	doc := strings.Repeat("{k: [", 40) + strings.Repeat("]}", 40)
	var tr tree
	err := yamlstrict.Decode([]byte(doc), &tr)
	errs, _ := yamlstrict.AsErrors(err)
	if len(errs) != 1 || !strings.Contains(errs[0].Msg, "nested too deeply") {
		t.Fatalf("Decode = %v, want nested too deeply", err)
	}
	if !strings.HasPrefix(errs[0].Path, "k[0].k[0].k[0]") {
		t.Errorf("path = %q", errs[0].Path)
	}
	// 20 levels are fine
	doc = strings.Repeat("{k: [", 20) + strings.Repeat("]}", 20)
	if err := yamlstrict.Decode([]byte(doc), &tr); err != nil {
		t.Errorf("20 levels: %v", err)
	}
}

func TestAllErrorsAtOnce(t *testing.T) {
	_, errs := decode(t, "nam: a\nport: x\nitems: [{b: y}]\ntimeouts: {read: z}\nlimits: {a: b}\n")
	expect(t, errs, "nam: unknown field", "port: invalid value", "items[0].b: invalid value", "timeouts.read: invalid value", "limits.a: invalid value")
	text := errs.Error()
	if strings.Count(text, "\n") != 4 || !strings.HasPrefix(text, "nam: unknown field (did you mean \"name\"?) (line 1)\nport: invalid value") {
		t.Errorf("Errors.Error() =\n%s", text)
	}
}

func TestNotAPointer(t *testing.T) {
	var c config
	err := yamlstrict.Decode([]byte("name: x\n"), c)
	if err == nil || !strings.Contains(err.Error(), "non-nil pointer") {
		t.Errorf("Decode(non-pointer) = %v", err)
	}
	if _, ok := yamlstrict.AsErrors(err); ok {
		t.Error("a programming error reported as field errors")
	}
	var nilPtr *config
	if err := yamlstrict.Decode([]byte("name: x\n"), nilPtr); err == nil {
		t.Error("Decode(nil pointer) succeeded")
	}
}

func TestErrorsHelpers(t *testing.T) {
	var es yamlstrict.Errors
	if es.Err() != nil {
		t.Error("empty Errors.Err() is not nil")
	}
	es.Add("a.b[2]", "bad %d", 7)
	es = append(es, &yamlstrict.FieldError{Msg: "whole", Line: 3})
	if got := es.Err().Error(); got != "a.b[2]: bad 7\n(document): whole (line 3)" {
		t.Errorf("Error() = %q", got)
	}
	wrapped := fmt.Errorf("apply: %w", es.Err())
	got, ok := yamlstrict.AsErrors(wrapped)
	if !ok || len(got) != 2 {
		t.Errorf("AsErrors(wrapped Errors) = %v, %v", got, ok)
	}
	got, ok = yamlstrict.AsErrors(fmt.Errorf("x: %w", es[0]))
	if !ok || len(got) != 1 || got[0].Path != "a.b[2]" {
		t.Errorf("AsErrors(wrapped FieldError) = %v, %v", got, ok)
	}
	if _, ok := yamlstrict.AsErrors(errors.New("plain")); ok {
		t.Error("AsErrors(plain error) = ok")
	}
}
