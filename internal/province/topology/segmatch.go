package topology

import (
	"regexp/syntax"
	"strings"
	"unicode"
	"unicode/utf8"
)

// segMatcher runs the common channel expressions (literal segments, runs
// of a character class such as [^/]+ or [0-9]{4}, ^ and $) without
// regexp, whose submatch extraction allocates on every request. It is
// built only for expressions where matching element by element, each run
// as long as it can, finds exactly the match (and the channel group) Go's
// regexp finds; anything else stays with regexp (segmentsOf returns nil).
type segMatcher struct {
	anchored bool // ^: the match starts at the path's first byte
	end      bool // $: the match ends at the path's last byte
	elems    []segElem
	// The channel group spans elems[from:to].
	from, to int
}

// segElem is a literal, or a run of bytes of a class.
type segElem struct {
	lit      string
	class    *byteClass // nil for a literal
	min, max int        // run length bounds; max < 0: unbounded
	// stop is the one byte the class lacks ([^/]: '/'), so that an
	// unbounded run is an IndexByte; -1 when it lacks more or none.
	stop int
}

// byteClass is a set of bytes; a class containing any non-ASCII rune
// contains all of them (and the bytes of invalid UTF-8), so that matching
// bytes and matching runes end a run at the same place.
type byteClass [256]bool

// maxSegElems bounds the elements of a segment matcher; longer expressions
// use regexp (the length limit on expressions keeps either cheap).
const maxSegElems = 64

// segmentsOf compiles re (parsed with syntax.Perl) into a segment matcher,
// or returns nil when it has a form the matcher does not cover.
func segmentsOf(re *syntax.Regexp, group string) *segMatcher {
	b := segBuilder{m: &segMatcher{from: -1, to: -1}, group: group}
	if !b.walk(re) || b.m.from < 0 || len(b.m.elems) > maxSegElems || !b.m.deterministic() {
		return nil
	}
	if !b.m.anchored && (len(b.m.elems) == 0 || b.m.elems[0].class != nil) {
		return nil // an unanchored search needs a literal to look for
	}
	return b.m
}

type segBuilder struct {
	m     *segMatcher
	group string
}

func (b *segBuilder) walk(re *syntax.Regexp) bool {
	m := b.m
	if m.end && re.Op != syntax.OpEmptyMatch && re.Op != syntax.OpConcat && re.Op != syntax.OpCapture {
		return false // nothing may follow $
	}
	switch re.Op {
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if !b.walk(sub) {
				return false
			}
		}
		return true
	case syntax.OpCapture:
		if re.Name != b.group {
			return b.walk(re.Sub[0])
		}
		if m.from >= 0 {
			return false
		}
		m.from = len(m.elems)
		ok := b.walk(re.Sub[0])
		m.to = len(m.elems)
		return ok
	case syntax.OpEmptyMatch:
		return true
	case syntax.OpBeginText:
		if m.anchored || len(m.elems) > 0 || m.from >= 0 {
			return false
		}
		m.anchored = true
		return true
	case syntax.OpEndText:
		m.end = true
		return true
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return false
		}
		for _, r := range re.Rune {
			if r == utf8.RuneError { // regexp matches it against any invalid byte
				return false
			}
		}
		m.elems = append(m.elems, segElem{lit: string(re.Rune)})
		return true
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return b.run(re, 1, 1)
	case syntax.OpStar:
		return b.repeat(re, 0, -1)
	case syntax.OpPlus:
		return b.repeat(re, 1, -1)
	case syntax.OpQuest:
		return b.repeat(re, 0, 1)
	case syntax.OpRepeat:
		return b.repeat(re, re.Min, re.Max)
	}
	return false
}

func (b *segBuilder) repeat(re *syntax.Regexp, min, max int) bool {
	if re.Flags&syntax.NonGreedy != 0 {
		return false
	}
	return b.run(re.Sub[0], min, max)
}

// run appends a run of min to max characters of re, a single-character
// expression.
func (b *segBuilder) run(re *syntax.Regexp, min, max int) bool {
	var ranges []rune
	switch re.Op {
	case syntax.OpCharClass:
		ranges = re.Rune
	case syntax.OpAnyChar:
		ranges = []rune{0, unicode.MaxRune}
	case syntax.OpAnyCharNotNL:
		ranges = []rune{0, '\n' - 1, '\n' + 1, unicode.MaxRune}
	case syntax.OpLiteral:
		if len(re.Rune) != 1 || re.Flags&syntax.FoldCase != 0 {
			return false
		}
		ranges = []rune{re.Rune[0], re.Rune[0]}
	default:
		return false
	}
	c, wide, ok := classOf(ranges)
	// With non-ASCII in the class a run counts bytes where regexp counts
	// runes: only "any number" and "at least one" mean the same for both.
	if !ok || wide && (max >= 0 || min > 1) {
		return false
	}
	stop := -1
	for x := range c {
		if !c[x] {
			if stop >= 0 {
				stop = -1
				break
			}
			stop = x
		}
	}
	b.m.elems = append(b.m.elems, segElem{class: c, min: min, max: max, stop: stop})
	return true
}

// classOf turns rune ranges (lo, hi pairs) into a byte class; wide says it
// holds every non-ASCII rune; ok is false when it holds some but not all.
func classOf(ranges []rune) (c *byteClass, wide, ok bool) {
	c = new(byteClass)
	var high rune // non-ASCII runes covered
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		for r := lo; r <= hi && r < utf8.RuneSelf; r++ {
			c[r] = true
		}
		if hi >= utf8.RuneSelf {
			high += hi - max(lo, utf8.RuneSelf) + 1
		}
	}
	switch high {
	case 0:
		return c, false, true
	case unicode.MaxRune - utf8.RuneSelf + 1:
		for i := utf8.RuneSelf; i < 256; i++ {
			c[i] = true
		}
		return c, true, true
	}
	return nil, false, false
}

// deterministic reports whether taking each run as long as it can is the
// only way to match: no byte a run may take can start what follows it (up
// to the first element that must consume something). Then the greedy,
// leftmost-first match regexp prefers is the one this finds.
func (m *segMatcher) deterministic() bool {
	for k, e := range m.elems {
		if e.class == nil {
			continue
		}
		for _, next := range m.elems[k+1:] {
			if next.class == nil {
				if e.class[next.lit[0]] {
					return false
				}
				break
			}
			for x := range next.class {
				if next.class[x] && e.class[x] {
					return false
				}
			}
			if next.min > 0 {
				break
			}
		}
	}
	return true
}

// find returns the channel group's span in s, and whether the expression
// matches; it does not allocate.
func (m *segMatcher) find(s string) (start, end int, ok bool) {
	if m.anchored {
		return m.matchAt(s, 0)
	}
	lit := m.elems[0].lit
	for i := 0; i <= len(s); {
		j := strings.Index(s[i:], lit)
		if j < 0 {
			return 0, 0, false
		}
		if start, end, ok = m.matchAt(s, i+j); ok {
			return start, end, true
		}
		i += j + 1
	}
	return 0, 0, false
}

func (m *segMatcher) matchAt(s string, i int) (start, end int, ok bool) {
	for k := range m.elems {
		if k == m.from {
			start = i
		}
		if k == m.to {
			end = i
		}
		e := &m.elems[k]
		if e.class == nil {
			if !strings.HasPrefix(s[i:], e.lit) {
				return 0, 0, false
			}
			i += len(e.lit)
			continue
		}
		n := 0
		if e.stop >= 0 && e.max < 0 {
			n = strings.IndexByte(s[i:], byte(e.stop))
			if n < 0 {
				n = len(s) - i
			}
			i += n
		} else {
			for i < len(s) && (e.max < 0 || n < e.max) && e.class[s[i]] {
				i++
				n++
			}
		}
		if n < e.min {
			return 0, 0, false
		}
	}
	if m.from == len(m.elems) {
		start = i
	}
	if m.to == len(m.elems) {
		end = i
	}
	if m.end && i != len(s) {
		return 0, 0, false
	}
	return start, end, true
}
