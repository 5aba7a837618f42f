package yamlstrict

import (
	"bytes"
	"cmp"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Large documents are decoded a list item at a time: yaml.v3 builds a node
// tree of ~190 bytes a node before decoding anything (about 14x a
// flow-style document), which for a province-scale topology is most of
// what applying it costs. A top-level block list (`nodes:` followed by
// `- ` items) is cut at its items' lines; each item is parsed, checked
// and decoded on its own, and the rest of the document (the skeleton,
// with the lists emptied and their lines kept blank so that line numbers
// stay true) is decoded as usual. Only the tree of one item is alive at a
// time.
//
// The cut is made on lines, so it is attempted only on documents whose
// top level is plainly laid out: keys at column 0, list items at one
// indentation, only "\n" line breaks, no tabs or byte order mark. A quote,
// flow collection or block scalar cannot span a cut without leaving one
// side unterminated, so any YAML syntax error, and any alias (which could
// point into another item), sends the document to the whole-tree decoder,
// which then gives its usual answer: what the chunked decoder accepts is
// exactly what the whole-tree decoder accepts, and decodes the same.
// FuzzChunked holds the two to that.

// chunkThreshold: smaller documents are decoded whole (their tree is small
// and the whole-tree decoder is the reference).
const chunkThreshold = 64 << 10

// errNotChunkable sends a document back to the whole-tree decoder.
var errNotChunkable = errors.New("yamlstrict: not decodable in chunks")

// list is one top-level block list of a document.
type list struct {
	key      string
	keyLine  int      // 0-based index of the `key:` line
	items    [][2]int // byte ranges [start, end) of each item, in order
	itemLine []int    // 0-based index of each item's first line
}

// layout finds the top-level block lists of data, or reports that data is
// not laid out plainly enough to cut on lines. An item runs from its `- `
// line to the next item or top-level key (comments and blank lines
// between are its own: a block scalar's kept trailing lines are part of it).
func layout(data []byte) ([]list, error) {
	if bytes.ContainsAny(data, "\r\t") || bytes.Contains(data, []byte("\u0085")) ||
		bytes.Contains(data, []byte("\u2028")) || bytes.Contains(data, []byte("\u2029")) ||
		bytes.HasPrefix(data, []byte("\ufeff")) {
		return nil, errNotChunkable
	}
	var lists []list
	seen := map[string]bool{}
	var cur *list
	indent := -1 // of cur's items, once known
	// closeItem ends cur's last item where a boundary line starts.
	closeItem := func(at int) {
		if cur != nil && len(cur.items) > 0 {
			cur.items[len(cur.items)-1][1] = at
		}
	}
	line := 0
	for off := 0; off < len(data); line++ {
		end := bytes.IndexByte(data[off:], '\n')
		next := len(data)
		if end >= 0 {
			next = off + end + 1
			end = off + end
		} else {
			end = len(data)
		}
		text := data[off:end]
		ind := len(text) - len(bytes.TrimLeft(text, " "))
		body := text[ind:]
		switch {
		case len(body) == 0 || body[0] == '#':
			// blank or comment: belongs to whatever it is inside
		case ind == 0 && !isItem(body):
			key, rest, ok := topKey(body)
			if !ok || seen[key] {
				return nil, errNotChunkable // a key given twice: see decodeWhole
			}
			seen[key] = true
			closeItem(off)
			cur, indent = nil, -1
			if rest == "" { // `key:` alone: maybe a block list follows
				lists = append(lists, list{key: key, keyLine: line})
				cur = &lists[len(lists)-1]
			}
		case cur == nil:
			// inside a top-level entry that is not a list being cut
		case indent < 0 && !isItem(body):
			cur = nil // `key:` holding a mapping or a scalar
		case indent < 0 || ind == indent && isItem(body):
			closeItem(off)
			indent = ind
			cur.items = append(cur.items, [2]int{off, len(data)})
			cur.itemLine = append(cur.itemLine, line)
		case ind <= indent:
			return nil, errNotChunkable // some other text at the items' indentation
		}
		off = next
	}
	kept := lists[:0]
	for _, l := range lists {
		if len(l.items) > 0 {
			kept = append(kept, l)
		}
	}
	return kept, nil
}

// skeletonOf is data with the items of cut lists left out and their `key:`
// lines made `key: []`, every other line where it was (so that the
// skeleton's line numbers are the document's).
func skeletonOf(data []byte, cut []list) []byte {
	var b []byte
	off := 0
	for _, l := range cut {
		ks := lineStart(data, l.keyLine)
		b = append(b, data[off:ks]...)
		colon := ks + len(l.key) + 1
		b = append(b, data[ks:colon]...)
		b = append(b, " []"...)
		b = append(b, data[colon:l.items[0][0]]...) // its comment, the break, comments before the first item
		last := l.items[len(l.items)-1][1]
		b = append(b, bytes.Repeat([]byte{'\n'}, bytes.Count(data[l.items[0][0]:last], []byte{'\n'}))...)
		off = last
	}
	return append(b, data[off:]...)
}

// isItem: a block sequence entry ("- ..." or a lone "-").
func isItem(body []byte) bool {
	return body[0] == '-' && (len(body) == 1 || body[1] == ' ')
}

// topKey parses a top-level `key:` line: a plain key of letters, digits and
// underscores, then a colon, then the rest of the line without its comment.
func topKey(body []byte) (key, rest string, ok bool) {
	i := 0
	for i < len(body) && (body[i] == '_' || body[i] >= 'a' && body[i] <= 'z' || body[i] >= 'A' && body[i] <= 'Z' || body[i] >= '0' && body[i] <= '9') {
		i++
	}
	if i == 0 || i == len(body) || body[i] != ':' || (i+1 < len(body) && body[i+1] != ' ') {
		return "", "", false
	}
	rest = strings.TrimSpace(string(body[i+1:]))
	if strings.HasPrefix(rest, "#") {
		rest = ""
	}
	return string(body[:i]), rest, true
}

// decodeChunked decodes data, whose top-level lists are lists, into out.
// It returns errNotChunkable when the whole-tree decoder must decide.
func decodeChunked(data []byte, out reflect.Value, lists []list) error {
	root := out.Type().Elem()
	if root.Kind() != reflect.Struct {
		return errNotChunkable
	}
	fields := yamlFields(root)
	type cut struct {
		list
		field []int // index path of the Go field
		elem  reflect.Type
	}
	var cuts []cut
	for _, l := range lists {
		ft, ok := fields[l.key]
		if !ok || ft.Kind() != reflect.Slice {
			continue // the skeleton's check reports it
		}
		sf, ok := fieldByKey(root, l.key)
		if !ok {
			continue
		}
		cuts = append(cuts, cut{list: l, field: sf.Index, elem: ft.Elem()})
	}
	if len(cuts) == 0 {
		return errNotChunkable
	}
	w := walker{fields: map[reflect.Type]map[string]reflect.Type{}, root: root}
	values := make([]reflect.Value, len(cuts))
	for ci, c := range cuts {
		values[ci] = reflect.MakeSlice(reflect.SliceOf(c.elem), 0, len(c.items))
		for i, r := range c.items {
			n, err := parseOne(data[r[0]:r[1]])
			if err != nil {
				return err
			}
			if n.Kind != yaml.SequenceNode || len(n.Content) != 1 {
				return errNotChunkable
			}
			item := n.Content[0]
			dropNulls(item, 1)
			before := len(w.errs)
			w.path = append(w.path[:0], c.key...)
			w.push("", i)
			w.check(item, c.elem, 2)
			for _, e := range w.errs[before:] {
				if e.Line > 0 {
					e.Line += c.itemLine[i]
				}
			}
			if len(w.errs) > 0 {
				continue // checking the rest; nothing is decoded any more
			}
			// Decoded as the one-item list it is, so that yaml.v3 treats
			// the item as it would inside the whole list (a null item of
			// structs is left out, for one).
			v := reflect.New(values[ci].Type())
			if err := n.Decode(v.Interface()); err != nil {
				return append(w.errs, &FieldError{Path: string(w.path), Line: item.Line + c.itemLine[i], Msg: strings.TrimPrefix(err.Error(), "yaml: ")})
			}
			values[ci] = reflect.AppendSlice(values[ci], v.Elem())
		}
	}
	kept := make([]list, len(cuts))
	for i, c := range cuts {
		kept[i] = c.list
	}
	doc, err := parseOne(skeletonOf(data, kept))
	if err != nil {
		return err
	}
	w.path = w.path[:0]
	dropNulls(doc, 0)
	sk := walker{fields: w.fields, root: root}
	sk.check(doc, root, 0)
	errs := append(sk.errs, w.errs...)
	if len(errs) > 0 {
		// In document order, as the whole-tree walker reports them.
		slices.SortStableFunc(errs, func(a, b *FieldError) int { return cmp.Compare(a.Line, b.Line) })
		return errs
	}
	// Decode into a copy, so that out is left as it was on an error.
	tmp := reflect.New(root)
	tmp.Elem().Set(out.Elem())
	if err := doc.Decode(tmp.Interface()); err != nil {
		return Errors{{Msg: strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	for ci, c := range cuts {
		tmp.Elem().FieldByIndex(c.field).Set(values[ci])
	}
	out.Elem().Set(tmp.Elem())
	return nil
}

// parseOne parses exactly one document; a syntax error, an alias or more
// than one document is errNotChunkable (the whole-tree decoder words it).
func parseOne(b []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		return nil, errNotChunkable
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errNotChunkable
	}
	n := &root
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if hasAlias(n, 0) {
		return nil, errNotChunkable
	}
	return n, nil
}

func hasAlias(n *yaml.Node, depth int) bool {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return true
	}
	if depth > maxDepth {
		return false // the walker reports the depth
	}
	for _, c := range n.Content {
		if hasAlias(c, depth+1) {
			return true
		}
	}
	return false
}

// lineStart is the offset of the 0-based line n.
func lineStart(b []byte, n int) int {
	off := 0
	for ; n > 0; n-- {
		off += bytes.IndexByte(b[off:], '\n') + 1
	}
	return off
}

// fieldByKey finds the struct field (through inlined structs) of a key.
func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			if sub, ok := fieldByKey(f.Type, key); ok {
				sub.Index = append([]int{i}, sub.Index...)
				return sub, true
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		if name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
