package yamlstrict

import (
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Locate sets the line of each error that has none (a problem found after
// decoding, by validating the decoded value) from its field path in data.
// A path that leads to a missing field (`required`) gets the line of the
// nearest enclosing entry. A path may name entries, as in
// `nodes[3] (hefei-1).region`: the parenthesised names are skipped. With
// nameKey, an entry of a list that is a mapping with a valid name under
// nameKey (valid(name)) gets its name in the path where it has none: an
// index alone does not say which of 10,000 servers is meant. data is parsed
// again, so call it only when there are errors.
func Locate(data []byte, es Errors, nameKey string, valid func(string) bool) {
	need := false
	for _, e := range es {
		need = need || e.Path != ""
	}
	// Without a path there is nothing to find (and a document refused as
	// too large must not be parsed).
	if !need || len(data) > MaxDocumentBytes {
		return
	}
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return
	}
	for _, e := range es {
		if e.Path == "" {
			continue
		}
		n, named := find(&root, e.Path, nameKey, valid)
		if e.Line == 0 && n != nil {
			e.Line = n.Line
		}
		if nameKey != "" && valid != nil {
			e.Path = named
		}
	}
}

// find follows path from the document root as far as it exists; it returns
// the node reached and the path with entries named.
func find(n *yaml.Node, path, nameKey string, valid func(string) bool) (*yaml.Node, string) {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) != 1 {
			return nil, path
		}
		n = n.Content[0]
	}
	var b strings.Builder
	for path != "" {
		switch path[0] {
		case '.':
			b.WriteByte('.')
			path = path[1:]
		case ' ': // " (name)"
			end := strings.IndexByte(path, ')')
			if end < 0 {
				b.WriteString(path)
				return n, b.String()
			}
			b.WriteString(path[:end+1])
			path = path[end+1:]
		case '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				b.WriteString(path)
				return n, b.String()
			}
			i, err := strconv.Atoi(path[1:end])
			if err != nil || n.Kind != yaml.SequenceNode || i < 0 || i >= len(n.Content) {
				b.WriteString(path)
				return n, b.String()
			}
			b.WriteString(path[:end+1])
			n, path = n.Content[i], path[end+1:]
			if !strings.HasPrefix(path, " (") && nameKey != "" && valid != nil {
				if v := value(n, nameKey); v != nil && v.Kind == yaml.ScalarNode && valid(v.Value) {
					b.WriteString(" (" + v.Value + ")")
				}
			}
		default:
			end := strings.IndexAny(path, ".[ ")
			if end < 0 {
				end = len(path)
			}
			next := value(n, path[:end])
			if next == nil {
				b.WriteString(path)
				return n, b.String()
			}
			b.WriteString(path[:end])
			n, path = next, path[end:]
		}
	}
	return n, b.String()
}

// value is the value of key in mapping n; nil when n is no mapping or has
// no such key.
func value(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// Nearest returns the candidate closest to word by edit distance, for a
// "did you mean" hint; "" when none is close (more than a third of the
// word's letters, and at least 2, would have to change).
func Nearest(word string, candidates []string) string {
	best, bestD := "", max(2, len(word)/3)+1
	for _, c := range candidates {
		if c == "" || c == word {
			continue
		}
		if d := editDistance(word, c); d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	return best
}
