package yamlstrict

import (
	"strings"
	"testing"
)

const locateDoc = `nodes:
  - name: hefei-1
    servers:
      - name: hefei-1-a
        address: 10.1.1.10
  - name: Bad Name
    servers: []
`

func TestLocate(t *testing.T) {
	valid := func(n string) bool { return !strings.ContainsAny(n, " ()") && n == strings.ToLower(n) }
	es := Errors{
		{Path: "nodes[0].servers[0].address", Msg: "not host:port"},
		{Path: "nodes[0] (hefei-1).servers[0] (hefei-1-a).weight", Msg: "required"}, // missing: its entry's line
		{Path: "nodes[1].servers", Msg: "at least one"},                             // invalid name: not inserted
		{Path: "nodes[7].name", Msg: "beyond the list"},
		{Path: "", Msg: "the document"},
		{Path: "nodes[0].name", Line: 99, Msg: "keeps its line"},
	}
	Locate([]byte(locateDoc), es, "name", valid)
	want := []string{
		"nodes[0] (hefei-1).servers[0] (hefei-1-a).address: not host:port (line 5)",
		"nodes[0] (hefei-1).servers[0] (hefei-1-a).weight: required (line 4)",
		"nodes[1].servers: at least one (line 7)",
		"nodes[7].name: beyond the list (line 2)",
		"(document): the document",
		"nodes[0] (hefei-1).name: keeps its line (line 99)",
	}
	for i, e := range es {
		if e.Error() != want[i] {
			t.Errorf("%d: %q, want %q", i, e.Error(), want[i])
		}
	}
}

func TestNearest(t *testing.T) {
	known := []string{"hefei", "wuhu", "tongcheng", "huainan", "huaibei"}
	for word, want := range map[string]string{
		"tiancheng": "tongcheng", "hefie": "hefei", "wuhan": "wuhu", "huaiban": "huainan",
		"shanghai": "", "x": "", "hefei": "",
	} {
		if got := Nearest(word, known); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", word, got, want)
		}
	}
}

// FuzzLocate: any document and any path leave Locate without a panic, and
// the path keeps its steps.
func FuzzLocate(f *testing.F) {
	f.Add([]byte(locateDoc), "nodes[0] (hefei-1).servers[0].address")
	f.Add([]byte(locateDoc), "nodes[1")
	f.Add([]byte(locateDoc), "nodes[0] (x")
	f.Add([]byte("a: [1, {name: b}]"), "a[1].c[-1]")
	f.Fuzz(func(t *testing.T, data []byte, path string) {
		es := Errors{{Path: path, Msg: "m"}}
		Locate(data, es, "name", func(n string) bool { return n != "" && !strings.ContainsAny(n, " ()[].") })
		// Locate only inserts names: the path given is still there, in order.
		if !subsequence(path, es[0].Path) {
			t.Fatalf("path %q lost steps: %q", path, es[0].Path)
		}
	})
}

// subsequence reports whether every byte of s appears in t, in order.
func subsequence(s, t string) bool {
	for i := 0; i < len(t) && s != ""; i++ {
		if t[i] == s[0] {
			s = s[1:]
		}
	}
	return s == ""
}
