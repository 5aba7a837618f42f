package topology

import (
	"bytes"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// WithRevision returns a document as the operator wrote it with its
// top-level `revision:` set to rev: the line replaced, or added before the
// first key. Everything else, comments included, stays byte for byte, so
// that `schedctl get topology > f; edit f; schedctl apply -f f` keeps the
// comments and still passes the stale check. ok is false when the document
// does not allow a line edit (a flow mapping such as JSON, a revision
// written over several lines): the caller renders the document instead.
func WithRevision(src []byte, rev int64) (out []byte, ok bool) {
	var doc yaml.Node
	if yaml.Unmarshal(src, &doc) != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, false
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode || root.Style&yaml.FlowStyle != 0 || len(root.Content) == 0 || root.Line < 1 {
		return nil, false
	}
	lines := bytes.SplitAfter(src, []byte("\n"))
	entry := []byte(strings.Repeat(" ", max(0, root.Column-1)) + "revision: " + strconv.FormatInt(rev, 10) + "\n")
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "revision" {
			continue
		}
		if v.Kind != yaml.ScalarNode || v.Line != k.Line || k.Line > len(lines) {
			return nil, false
		}
		lines[k.Line-1] = entry
		return bytes.Join(lines, nil), true
	}
	if root.Line > len(lines) {
		return nil, false
	}
	lines = append(lines[:root.Line-1], append([][]byte{entry}, lines[root.Line-1:]...)...)
	return bytes.Join(lines, nil), true
}
