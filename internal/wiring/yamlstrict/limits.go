package yamlstrict

// Limits on a document, checked before yaml.v3 builds its node tree: the
// tree costs ~190 bytes a node (about 14x a flow-style document, far more
// for `[a,a,a,...]`), so a byte limit alone does not bound memory.
type Limits struct {
	MaxBytes int // 0: MaxDocumentBytes
	MaxNodes int // 0: DefaultMaxNodes
}

// DefaultMaxNodes bounds the YAML nodes of a document (~190 MB of node tree
// at most); configuration files hold a few hundred.
const DefaultMaxNodes = 1_000_000

func (l Limits) maxBytes() int {
	if l.MaxBytes > 0 {
		return l.MaxBytes
	}
	return MaxDocumentBytes
}

func (l Limits) maxNodes() int {
	if l.MaxNodes > 0 {
		return l.MaxNodes
	}
	return DefaultMaxNodes
}

// nodeBound is an upper bound of the YAML nodes data can hold, found in
// one pass without building anything. Every node but the document and its
// root starts right after an indicator (a line break, `,`, `[`, `{`, `:`,
// `?`, or `-` followed by white space), and one indicator starts at most two
// nodes (a block mapping and its first key; a flow key and its implied
// null), so twice their number bounds the nodes. Nothing is skipped (a
// quote or `#` inside a plain scalar would make skipping unsound): colons,
// commas and line breaks in scalars and comments only loosen the bound.
// FuzzNodeBound holds it to what yaml.v3 builds.
func nodeBound(data []byte) int {
	indicators := 0
	for i, b := range data {
		switch b {
		// 0x85, 0xa8, 0xa9 end NEL, LS and PS, line breaks to YAML too.
		case '\n', '\r', ',', '[', '{', ':', '?', 0x85, 0xa8, 0xa9:
			indicators++
		case '-':
			if i+1 == len(data) {
				indicators++
				break
			}
			switch data[i+1] {
			case ' ', '\t', '\n', '\r', 0, 0xc2, 0xe2: // white space, or the first byte of NEL, LS, PS
				indicators++
			}
		}
	}
	return 2*indicators + 2
}
