package yamlstrict

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// A "billion laughs" alias bomb: nine levels of ten aliases each would be
// 10^9 strings once expanded. It must be refused at once.
const aliasBomb = `a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`

func TestAliasBombRefusedQuickly(t *testing.T) {
	var out struct {
		A, B, C, D, E, F, G, H, I []string
	}
	start := time.Now()
	err := Decode([]byte(aliasBomb), &out)
	if took := time.Since(start); took > time.Second {
		t.Errorf("took %v", took)
	}
	if err == nil || !strings.Contains(err.Error(), "b[0]: YAML aliases are not allowed") {
		t.Fatalf("err = %v", err)
	}
	// Into untyped values too, where yaml.v3 itself would expand them.
	var anyOut struct {
		I any `yaml:"i"`
	}
	if err := Decode([]byte(aliasBomb), &anyOut); err == nil {
		t.Fatal("alias bomb accepted")
	}
}

// TestNodeLimit: a document with more YAML nodes than the limit is refused
// before its tree is built, with an error naming the limit.
func TestNodeLimit(t *testing.T) {
	var out struct{ Nets []string }
	doc := []byte("nets: [" + strings.Repeat("a,", 600_000) + "a]\n")
	start := time.Now()
	err := Decode(doc, &out)
	if err == nil || !strings.Contains(err.Error(), "more than the limit of 1000000") {
		t.Fatalf("err = %v", err)
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("refusing took %v: the tree was built", took)
	}
	small := []byte("nets: [a, b, c]\n")
	if err := DecodeLimited(small, &out, Limits{MaxNodes: 7}); err == nil || !strings.Contains(err.Error(), "limit of 7") {
		t.Fatalf("MaxNodes 7: %v", err)
	}
	if err := DecodeLimited(small, &out, Limits{MaxNodes: 100}); err != nil || len(out.Nets) != 3 {
		t.Fatalf("MaxNodes 100: %v %v", out.Nets, err)
	}
	if err := DecodeLimited(small, &out, Limits{MaxBytes: 10}); err == nil || !strings.Contains(err.Error(), "more than the limit of 10") {
		t.Fatalf("MaxBytes 10: %v", err)
	}
}

// TestNonFiniteFloats: .nan and .inf are YAML floats, but no field means
// them; each is refused with its path.
func TestNonFiniteFloats(t *testing.T) {
	var out struct {
		Cap struct {
			Mbps float64 `yaml:"mbps"`
		} `yaml:"cap"`
		List []float32 `yaml:"list"`
	}
	err := Decode([]byte("cap: {mbps: .nan}\nlist: [1, -.inf, .Inf]\n"), &out)
	for _, want := range []string{"cap.mbps: invalid value: .nan is not a finite number", "list[1]: invalid value: -.inf is not a finite number", "list[2]:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
	if err := Decode([]byte("cap: {mbps: 1e308}\n"), &out); err != nil || out.Cap.Mbps != 1e308 {
		t.Fatalf("a finite float: %v %v", out.Cap.Mbps, err)
	}
}

// countNodes counts the nodes of every document in data, as yaml.v3 builds them.
func countNodes(data []byte) (int, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	total := 0
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return total, true
		}
		if err != nil {
			return 0, false
		}
		var walk func(*yaml.Node)
		walk = func(n *yaml.Node) {
			total++
			for _, c := range n.Content {
				walk(c)
			}
		}
		walk(&n)
	}
}

// FuzzNodeBound: nodeBound never undercounts what yaml.v3 builds, or the
// node limit would not bound memory.
//
//	go test ./internal/wiring/yamlstrict -run '^$' -fuzz FuzzNodeBound -fuzztime 60s
func FuzzNodeBound(f *testing.F) {
	for _, s := range []string{
		aliasBomb, "a: b\n", "- - - a\n", "{a, b, c}", "[a: b, c: d]", `["a":b,"c":d]`, `{"a":b}`,
		"? [a]\n: b\n", "- a:\n  - b: {c}\n", "[? a]", "a:\n  b:\n    c: d\n", "--- a\n--- b\n",
		"x: 'it''s, here'\ny: \"#\\\" [a,b]\"\n", "k: |\n  a,\n  b\n", "[[[[a]]]]", "- \n- \n-\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n, ok := countNodes(data)
		if ok && n > nodeBound(data) {
			t.Fatalf("%d nodes, bound %d: %q", n, nodeBound(data), data)
		}
	})
}
