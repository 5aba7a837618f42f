package yamlstrict

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

type chunkDoc struct {
	Name  string            `yaml:"name"`
	Items []chunkItem       `yaml:"items"`
	Other []string          `yaml:"other"`
	Meta  map[string]int    `yaml:"meta"`
	Extra map[string]string `yaml:"extra"`
}

type chunkItem struct {
	Name   string     `yaml:"name"`
	Weight int        `yaml:"weight"`
	Ratio  float64    `yaml:"ratio"`
	Tags   []string   `yaml:"tags"`
	Note   string     `yaml:"note"`
	Sub    *chunkItem `yaml:"sub"`
}

// decodeBoth decodes doc whole and, when it can be cut, in chunks.
func decodeBoth(doc []byte) (whole, chunked chunkDoc, wErr, cErr error, cut bool) {
	whole.Name, chunked.Name = "default", "default"
	wErr = decodeWhole(doc, reflect.ValueOf(&whole), false)
	lists, err := layout(doc)
	if err != nil || len(lists) == 0 {
		return whole, chunked, wErr, nil, false
	}
	cErr = decodeChunked(doc, reflect.ValueOf(&chunked), lists)
	if errors.Is(cErr, errNotChunkable) {
		return whole, chunked, wErr, nil, false
	}
	return whole, chunked, wErr, cErr, true
}

var chunkSeeds = []string{
	"name: a\nitems:\n  - name: x\n    weight: 1\n  - name: y\n    tags: [a, b]\nother: [p]\n",
	"items:\n- name: x\n- name: y\n  sub: {name: z}\n",
	"# head\nitems: # the items\n  # first\n  - name: x\n\n  - name: y\n    note: |+\n      kept\n\n\n# trailing\nname: b\n",
	"items:\n  - name: x\n    weight: 1.5\n  - name: y\n    colour: red\n",
	"items:\n  - name: 'x\n  - name: y'\n",
	"items:\n  - &a {name: x}\n  - *a\n",
	"items:\n  - name: x\nitems:\n  - name: y\n",
	"items:\n  - name: x\n    weight: two\nname: [1]\n",
	"items:\n  -\n    name: x\n  - name: y\n    ratio: .nan\n",
	"items:\n  - name: x\n    note: >\n      folded\n      text\n  - name: y\n",
	"items:\n  - name: x\n other: 1\n",
	"items:\n  - ~\n  - name: y\n    weight: ~\n",
	"items: []\nother:\n  - a\n  - b\n",
	"items:\n  - name: x\n---\nname: c\n",
	"meta:\n  a: 1\nitems:\n  - name: x\n    tags:\n      - a\n      - b\n",
}

// The chunked decoder accepts exactly what the whole-tree decoder accepts,
// decodes the same values and reports the same problems.
func TestChunkedMatchesWhole(t *testing.T) {
	cut := 0
	for _, s := range chunkSeeds {
		if checkChunked(t, []byte(s)) {
			cut++
		}
	}
	if cut < len(chunkSeeds)/2 {
		t.Errorf("only %d of %d seeds were cut: the layout rules refuse too much", cut, len(chunkSeeds))
	}
}

func checkChunked(t *testing.T, doc []byte) bool {
	t.Helper()
	w, c, wErr, cErr, cut := decodeBoth(doc)
	if !cut {
		return false
	}
	if (wErr == nil) != (cErr == nil) || (wErr != nil && wErr.Error() != cErr.Error()) {
		t.Fatalf("document %q:\nwhole:   %v\nchunked: %v", doc, wErr, cErr)
	}
	if wErr == nil && !reflect.DeepEqual(w, c) {
		t.Fatalf("document %q:\nwhole:   %+v\nchunked: %+v", doc, w, c)
	}
	return true
}

func FuzzChunked(f *testing.F) {
	for _, s := range chunkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if len(doc) > 4<<10 || nodeBound(doc) > 5000 {
			return
		}
		checkChunked(t, doc)
	})
}

// The threshold: a large province-style document goes through the chunks
// (the same result as whole, checked above), a small one never does.
func TestChunkedLayoutOfLargeLists(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: big\nitems:\n")
	for range 3000 {
		b.WriteString("  - name: n\n    tags: [a, b, c]\n    sub: {name: s, weight: 3}\n")
	}
	doc := []byte(b.String())
	if len(doc) < chunkThreshold {
		t.Fatalf("document of %d bytes is under the threshold", len(doc))
	}
	lists, err := layout(doc)
	if err != nil || len(lists) != 1 || len(lists[0].items) != 3000 {
		t.Fatalf("layout = %v, %v", lists, err)
	}
	var d chunkDoc
	if err := Decode(doc, &d); err != nil || len(d.Items) != 3000 || d.Items[2999].Sub.Weight != 3 {
		t.Fatalf("Decode: %v (%d items)", err, len(d.Items))
	}
	// A problem deep in the list names its item and its line.
	bad := strings.Replace(b.String(), "weight: 3}", "weight: 3, wieght: 4}", 1)
	err = Decode([]byte(bad), &d)
	if err == nil || !strings.Contains(err.Error(), `items[0].sub.wieght: unknown field (did you mean "weight"?) (line 5)`) {
		t.Fatalf("err = %v", err)
	}
}
