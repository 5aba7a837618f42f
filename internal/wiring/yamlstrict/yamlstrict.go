// Package yamlstrict decodes YAML into Go structs strictly: unknown keys, wrong
// kinds and unparsable scalars are all reported at once, each with the field
// path an operator can find in the document (`nodes[3].servers[0].weight`).
//
// yaml.v3's own KnownFields mode stops at the first problem and names only a
// line, which is not enough for a 10,000-server topology.
//
// A field whose type implements encoding.TextUnmarshaler (netip.Addr,
// netip.Prefix, a typed name) is written as one scalar and parsed by its
// UnmarshalText: its error is reported like any other bad value, with the
// field path and line.
package yamlstrict

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// FieldError is one problem at one place of a document.
type FieldError struct {
	Path string // e.g. nodes[3].servers[0].address; empty for the document itself
	Line int    // 1-based source line, 0 when unknown
	Msg  string
}

func (e *FieldError) Error() string {
	p := e.Path
	if p == "" {
		p = "(document)"
	}
	if e.Line > 0 {
		return fmt.Sprintf("%s: %s (line %d)", p, e.Msg, e.Line)
	}
	return p + ": " + e.Msg
}

// Errors is every problem found in one document. It is returned as a whole so
// that an operator fixes a file in one pass.
type Errors []*FieldError

func (es Errors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Add records a problem at path.
func (es *Errors) Add(path, format string, args ...any) {
	*es = append(*es, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// Err returns nil when there are no problems.
func (es Errors) Err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// Excluding returns the problems of es that have nothing to do with those
// of failed: none at, inside or above a path that failed, nor naming one in
// its message. es are problems found by validating a value DecodePartial
// produced, failed what it could not decode: a field that failed holds its
// previous value, and what is said about that value would mislead.
func (es Errors) Excluding(failed Errors) Errors {
	var out Errors
next:
	for _, e := range es {
		for _, f := range failed {
			if related(e.Path, f.Path) || (f.Path != "" && mentions(e.Msg, f.Path)) {
				continue next
			}
		}
		out = append(out, e)
	}
	return out
}

// related: a is b, or one of them is inside the other ("" holds all).
func related(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return strings.HasPrefix(b, a) && (a == "" || len(a) == len(b) || b[len(a)] == '.' || b[len(a)] == '[')
}

// mentions: msg names path as a whole word (not a longer key it begins).
func mentions(msg, path string) bool {
	for i := 0; ; {
		j := strings.Index(msg[i:], path)
		if j < 0 {
			return false
		}
		end := i + j + len(path)
		if end == len(msg) || !(msg[end] == '_' || msg[end] >= 'a' && msg[end] <= 'z' || msg[end] >= '0' && msg[end] <= '9') {
			return true
		}
		i = end
	}
}

// AsErrors extracts the field errors of err, if it carries any.
func AsErrors(err error) (Errors, bool) {
	var es Errors
	if errors.As(err, &es) {
		return es, true
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		return Errors{fe}, true
	}
	return nil, false
}

// MaxDocumentBytes bounds what Decode reads, so a runaway file cannot exhaust memory.
const MaxDocumentBytes = 256 << 20

// Decode decodes exactly one YAML document from data into out (a pointer to a
// struct) within the default Limits. An empty document is an error. Fields
// keep the values out already holds when the document does not set them, so
// callers set defaults first. On any problem out is left as it was.
func Decode(data []byte, out any) error { return DecodeLimited(data, out, Limits{}) }

// DecodeLimited is Decode within the limits l.
func DecodeLimited(data []byte, out any, l Limits) error { return decode(data, out, l, false) }

// DecodePartial is Decode, except that on problems it still decodes every
// value that has none: a field that fails keeps the value out held (a list
// with a bad element keeps it whole), so that a caller can validate the
// rest and report every problem at once (Errors.Excluding drops what the
// values left behind would misreport). Its error lists what failed.
func DecodePartial(data []byte, out any) error { return decode(data, out, Limits{}, true) }

func decode(data []byte, out any, l Limits, partial bool) error {
	if len(data) > l.maxBytes() {
		return Errors{{Msg: fmt.Sprintf("document is %d bytes, more than the limit of %d", len(data), l.maxBytes())}}
	}
	// Before yaml.v3 builds its tree: that tree, not the text, is what costs.
	if n := nodeBound(data); n > l.maxNodes() {
		return Errors{{Msg: fmt.Sprintf("document is too large: it may hold up to %d YAML nodes, more than the limit of %d", n, l.maxNodes())}}
	}
	rv := reflect.ValueOf(out)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("yamlstrict: Decode needs a non-nil pointer, got %T", out)
	}
	if !partial && len(data) >= chunkThreshold {
		if lists, err := layout(data); err == nil && len(lists) > 0 {
			if err := decodeChunked(data, rv, lists); !errors.Is(err, errNotChunkable) {
				return err
			}
		}
	}
	return decodeWhole(data, rv, partial)
}

// decodeWhole decodes data from yaml.v3's tree of the whole document.
func decodeWhole(data []byte, rv reflect.Value, partial bool) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return Errors{{Msg: "document is empty"}}
		}
		return Errors{{Msg: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Errors{{Msg: "more than one YAML document; expected exactly one"}}
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	w := walker{fields: map[reflect.Type]map[string]reflect.Type{}, root: rv.Type().Elem()}
	if partial {
		w.bad = map[*yaml.Node]bool{}
	}
	dropNulls(doc, 0)
	w.check(doc, rv.Type().Elem(), 0)
	if len(w.errs) > 0 && (!partial || w.bad[doc]) {
		return w.errs
	}
	if len(w.errs) > 0 {
		prune(doc, w.bad, 0)
	}
	if err := doc.Decode(rv.Interface()); err != nil {
		// check() should have caught everything; keep yaml's words if not.
		return append(w.errs, &FieldError{Msg: strings.TrimPrefix(err.Error(), "yaml: ")})
	}
	return w.errs.Err()
}

// prune takes out of n what check() found bad: each mapping's pair whose key
// or value is bad (a list with a bad element is bad as a whole).
func prune(n *yaml.Node, bad map[*yaml.Node]bool, depth int) {
	if depth > maxDepth {
		return
	}
	if n.Kind == yaml.MappingNode {
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			if !bad[n.Content[i]] && !bad[n.Content[i+1]] {
				kept = append(kept, n.Content[i], n.Content[i+1])
			}
		}
		n.Content = kept
	}
	for _, c := range n.Content {
		prune(c, bad, depth+1)
	}
}

const maxDepth = 64

var (
	unmarshalerType     = reflect.TypeFor[yaml.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	durationType        = reflect.TypeFor[time.Duration]()
)

// dropNulls removes `key: ~` pairs from mappings, so that an explicit null
// keeps the default for every kind of field (yaml.v3 would nil pointers,
// slices and maps).
func dropNulls(n *yaml.Node, depth int) {
	if depth > maxDepth {
		return
	}
	if n.Kind == yaml.MappingNode {
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			if v := n.Content[i+1]; v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null" {
				continue
			}
			kept = append(kept, n.Content[i], n.Content[i+1])
		}
		n.Content = kept
	}
	for _, c := range n.Content {
		dropNulls(c, depth+1)
	}
}

// walker checks a node tree against a Go type. It builds a field path only
// for an error, and each struct's field table once: a province-scale
// document has hundreds of thousands of nodes.
type walker struct {
	errs   Errors
	path   []byte
	fields map[reflect.Type]map[string]reflect.Type
	bad    map[*yaml.Node]bool // the nodes that failed, for prune; nil: not kept
	root   reflect.Type        // the document's type, for suggestions elsewhere
	keys   []string            // every key path of root through structs, built on demand
}

func (w *walker) fail(n *yaml.Node, msg string) {
	w.errs = append(w.errs, &FieldError{Path: string(w.path), Line: n.Line, Msg: msg})
	if w.bad != nil {
		w.bad[n] = true
	}
}

// push appends a key (or an [index] when key is empty) to the path and
// returns the length to pop back to.
func (w *walker) push(key string, index int) int {
	l := len(w.path)
	if key == "" && index >= 0 {
		w.path = append(w.path, '[')
		w.path = strconv.AppendInt(w.path, int64(index), 10)
		w.path = append(w.path, ']')
		return l
	}
	if l > 0 {
		w.path = append(w.path, '.')
	}
	w.path = append(w.path, key...)
	return l
}

func (w *walker) pop(l int) { w.path = w.path[:l] }

func (w *walker) structFields(t reflect.Type) map[string]reflect.Type {
	f, ok := w.fields[t]
	if !ok {
		f = yamlFields(t)
		w.fields[t] = f
	}
	return f
}

// check walks the node against the Go type and records every mismatch.
func (w *walker) check(n *yaml.Node, t reflect.Type, depth int) {
	if depth > maxDepth {
		w.fail(n, "nested too deeply")
		return
	}
	if n.Kind == yaml.AliasNode {
		w.fail(n, "YAML aliases are not allowed")
		return
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // null leaves the default in place
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		w.probe(n, t)
		return
	}
	if isText(t) {
		if n.Kind != yaml.ScalarNode {
			w.fail(n, "expected a single value, found "+kindName(n))
			return
		}
		w.probe(n, t)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			w.fail(n, "expected a mapping, found "+kindName(n))
			return
		}
		fields := w.structFields(t)
		var seen map[string]bool
		if len(n.Content) > 16 {
			seen = make(map[string]bool, len(n.Content)/2)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			l := w.push(k.Value, -1)
			switch f, ok := fields[k.Value]; {
			case given(n.Content[:i], k.Value, seen):
				w.fail(k, "key given twice")
			case !ok:
				w.fail(k, "unknown field"+w.suggest(k.Value, fields))
			default:
				w.check(v, f, depth+1)
			}
			w.pop(l)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			w.fail(n, "expected a list, found "+kindName(n))
			return
		}
		for i, c := range n.Content {
			l := w.push("", i)
			w.check(c, t.Elem(), depth+1)
			w.pop(l)
			if w.bad[c] {
				// A list is decoded whole or not at all: without the bad
				// element the others would move to indices no error names.
				w.bad[n] = true
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			w.fail(n, "expected a mapping, found "+kindName(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			l := w.push(n.Content[i].Value, -1)
			w.probe(n.Content[i], t.Key())
			w.check(n.Content[i+1], t.Elem(), depth+1)
			w.pop(l)
		}
	default:
		if n.Kind != yaml.ScalarNode {
			w.fail(n, "expected a single value, found "+kindName(n))
			return
		}
		w.probe(n, t)
	}
}

// given reports whether key is among the keys of pairs (a mapping's
// content before it); seen, when not nil, holds them instead (large
// mappings) and records key.
func given(pairs []*yaml.Node, key string, seen map[string]bool) bool {
	if seen != nil {
		dup := seen[key]
		seen[key] = true
		return dup
	}
	for i := 0; i < len(pairs); i += 2 {
		if pairs[i].Value == key {
			return true
		}
	}
	return false
}

// isText reports whether values of t decode from a scalar through
// UnmarshalText (yaml.v3 prefers it to the kind's own decoding).
func isText(t reflect.Type) bool { return reflect.PointerTo(t).Implements(textUnmarshalerType) }

// probe decodes a scalar into a throwaway value of the field's type.
func (w *walker) probe(n *yaml.Node, t reflect.Type) {
	if isText(t) {
		// UnmarshalText sees the scalar's text whatever its YAML tag.
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			w.fail(n, "invalid value: "+strings.TrimPrefix(err.Error(), "yaml: "))
		}
		return
	}
	switch t.Kind() {
	case reflect.String:
		// yaml.v3 stores any scalar's text in a string; only !!binary is decoded.
		if n.Kind == yaml.ScalarNode && n.ShortTag() != "!!binary" && !reflect.PointerTo(t).Implements(unmarshalerType) {
			return
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		// yaml.v3 truncates 1.5 into an int field without a word.
		if n.ShortTag() == "!!float" && t != durationType {
			w.fail(n, fmt.Sprintf("invalid value: %s is not a whole number", n.Value))
			return
		}
	}
	v := reflect.New(t)
	if err := n.Decode(v.Interface()); err != nil {
		msg := err.Error()
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			msg = te.Errors[0]
			if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "line ") {
				msg = msg[i+2:]
			}
		}
		w.fail(n, "invalid value: "+strings.TrimPrefix(msg, "yaml: "))
		return
	}
	// .nan and .inf are valid YAML floats, but no setting or capacity
	// means them, and downstream arithmetic would carry them everywhere.
	if k := t.Kind(); k == reflect.Float32 || k == reflect.Float64 {
		if f := v.Elem().Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			w.fail(n, fmt.Sprintf("invalid value: %s is not a finite number", n.Value))
		}
	}
}

func yamlFields(t reflect.Type) map[string]reflect.Type {
	m := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			for k, v := range yamlFields(f.Type) {
				m[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = f.Type
	}
	return m
}

// suggest is the "did you mean" of an unknown key: the nearest key of the
// same mapping or, failing that, the nearest key anywhere else in the
// document (by its full path: "trusted_proxy" at the top is
// http.trusted_proxies); "" when nothing is close.
func (w *walker) suggest(key string, fields map[string]reflect.Type) string {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	if best := nearestKey(key, names); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	if w.keys == nil {
		w.keys = keyPaths(w.root, "", 0, map[reflect.Type]bool{})
	}
	lk := normalize(key)
	best, bestD := "", -1
	for _, p := range w.keys {
		last := p[strings.LastIndexByte(p, '.')+1:]
		d := editDistance(lk, last)
		if d > closeEnough(lk, last) {
			continue
		}
		// The nearest; among equals the shortest path, then the first in order.
		if bestD < 0 || d < bestD || (d == bestD && (len(p) < len(best) || (len(p) == len(best) && p < best))) {
			best, bestD = p, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// keyPaths lists the dotted key paths of t reachable through structs (not
// lists or maps, whose entries an operator names differently).
func keyPaths(t reflect.Type, prefix string, depth int, visiting map[reflect.Type]bool) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || depth > 8 || visiting[t] || isText(t) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	visiting[t] = true
	defer delete(visiting, t)
	var out []string
	for name, ft := range yamlFields(t) {
		p := prefix + name
		out = append(out, p)
		out = append(out, keyPaths(ft, p+".", depth+1, visiting)...)
	}
	return out
}

// nearestKey returns the key closest to word by edit distance (case, '-'
// and '_' aside), if it is close enough to be a misspelling of it; "" when
// none is.
func nearestKey(word string, candidates []string) string {
	lw := normalize(word)
	best, bestD := "", -1
	for _, c := range candidates {
		lc := normalize(c)
		d := editDistance(lw, lc)
		if d > closeEnough(lw, lc) {
			continue
		}
		if bestD < 0 || d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	return best
}

func normalize(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }

// closeEnough is the largest edit distance still taken for a misspelling:
// 2, and a quarter of the longer word for long ones (trusted_proxy is 3 from
// trusted_proxies).
func closeEnough(a, b string) int { return max(2, max(len(a), len(b))/4) }

// editDistance is the Levenshtein distance, for "did you mean" hints.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	default:
		return "something else"
	}
}
