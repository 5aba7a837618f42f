package topology

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
)

// ChannelGroup is the name of the group of a channel path expression that
// captures the channel.
const ChannelGroup = "channel"

// Bounds on a service's channel spec: an expression is matched against
// every STB request, so it stays short; a content key of more than a few
// parameters means a cache entry per viewer.
const (
	MaxChannelPathLen = 512
	MaxChannelQuery   = 8
	maxParamNameLen   = 64
)

// Matchers, as ChannelPattern.Matcher names them.
const (
	MatcherSegments = "segments" // literal segments and character runs: no allocation
	MatcherRegexp   = "regexp"   // Go's regexp: one allocation per match (its submatch slice)
	MatcherQuery    = "query"    // no path expression: the first listed query parameter
)

// ChannelPattern is a service's ChannelSpec compiled (ServiceView.Channel).
// It is immutable and safe for concurrent use.
type ChannelPattern struct {
	Path  string   // the expression as written; "" when the channel is a query parameter
	Query []string // parameters joining the content key, in order
	seg   *segMatcher
	re    *regexp.Regexp // when seg is nil and Path is not ""
	group int            // re's channel group
}

// CompileChannel checks a channel spec and compiles it. The error lists
// every problem, each naming its field below the spec (path, query[1]).
func CompileChannel(spec ChannelSpec) (*ChannelPattern, error) {
	p, probs := compileChannel(spec)
	if len(probs) == 0 {
		return p, nil
	}
	errs := make([]error, len(probs))
	for i, pr := range probs {
		errs[i] = errors.New(strings.TrimPrefix(pr.field+": "+pr.msg, ": "))
	}
	return nil, errors.Join(errs...)
}

type channelProblem struct{ field, msg string }

func compileChannel(spec ChannelSpec) (*ChannelPattern, []channelProblem) {
	var probs []channelProblem
	add := func(field, format string, args ...any) {
		probs = append(probs, channelProblem{field, fmt.Sprintf(format, args...)})
	}
	p := &ChannelPattern{Path: spec.Path, Query: slices.Clone(spec.Query)}
	if spec.Path == "" && len(spec.Query) == 0 {
		add("", "path or query is required (leave channel out for the first path segment)")
	}
	if spec.Path != "" {
		if msg := p.compilePath(); msg != "" {
			add("path", "%s", msg)
		}
	}
	if len(spec.Query) > MaxChannelQuery {
		add("query", "%d parameters; at most %d", len(spec.Query), MaxChannelQuery)
	}
	for i, q := range spec.Query {
		field := fmt.Sprintf("query[%d]", i)
		if msg := paramNameProblem(q); msg != "" {
			add(field, "%s", msg)
		} else if j := slices.Index(spec.Query[:i], q); j >= 0 {
			add(field, "parameter %q is already query[%d]", q, j)
		}
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return p, nil
}

// compilePath compiles p.Path: into a segment matcher when it has that
// form, with regexp otherwise. It returns what is wrong, "" when nothing.
func (p *ChannelPattern) compilePath() string {
	if len(p.Path) > MaxChannelPathLen {
		return fmt.Sprintf("%d bytes; at most %d", len(p.Path), MaxChannelPathLen)
	}
	re, err := regexp.Compile(p.Path)
	if err != nil {
		return fmt.Sprintf("not a regular expression: %v", err)
	}
	p.group = re.SubexpIndex(ChannelGroup)
	if p.group < 0 {
		return fmt.Sprintf("no group named %s: write (?P<%s>...) around the channel: %q", ChannelGroup, ChannelGroup, p.Path)
	}
	if n := countOf(re.SubexpNames(), ChannelGroup); n > 1 {
		return fmt.Sprintf("%d groups named %s; one captures the channel", n, ChannelGroup)
	}
	if tree, err := syntax.Parse(p.Path, syntax.Perl); err == nil {
		p.seg = segmentsOf(tree, ChannelGroup)
	}
	if p.seg == nil {
		p.re = re
	}
	return ""
}

func countOf(names []string, name string) int {
	n := 0
	for _, s := range names {
		if s == name {
			n++
		}
	}
	return n
}

// paramNameProblem says what is wrong with a query parameter name; "" when
// nothing. Names are compared with the raw query's as they are, so they are
// limited to bytes a query carries unescaped.
func paramNameProblem(q string) string {
	if q == "" {
		return "empty parameter name"
	}
	if len(q) > maxParamNameLen {
		return fmt.Sprintf("longer than %d bytes", maxParamNameLen)
	}
	for i := 0; i < len(q); i++ {
		c := q[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0) {
			return fmt.Sprintf("%q is not a parameter name (letters, digits, '-', '.', '_', '~')", q)
		}
	}
	return ""
}

// Matcher says how the path is matched: MatcherSegments, MatcherRegexp or
// MatcherQuery.
func (p *ChannelPattern) Matcher() string {
	switch {
	case p.Path == "":
		return MatcherQuery
	case p.seg != nil:
		return MatcherSegments
	}
	return MatcherRegexp
}

// Channel is the request's channel: the text of the path expression's
// channel group (a substring of path, as sent), or, without a path
// expression, the raw value of the first listed query parameter. ok is
// false when the expression does not match, its group took no part in the
// match, or the parameter is absent. It allocates only for an expression
// Matcher calls regexp.
func (p *ChannelPattern) Channel(path, rawQuery string) (channel string, ok bool) {
	switch {
	case p.seg != nil:
		if s, e, ok := p.seg.find(path); ok {
			return path[s:e], true
		}
		return "", false
	case p.re != nil:
		m := p.re.FindStringSubmatchIndex(path)
		if m == nil || m[2*p.group] < 0 {
			return "", false
		}
		return path[m[2*p.group]:m[2*p.group+1]], true
	}
	return queryParam(rawQuery, p.Query[0])
}

// queryParam is the raw value of the first occurrence of name in rawQuery
// (the key compared as sent; "" for a bare "name"), and whether it occurs.
func queryParam(rawQuery, name string) (string, bool) {
	for rawQuery != "" {
		var kv string
		kv, rawQuery, _ = strings.Cut(rawQuery, "&")
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v, true
		}
	}
	return "", false
}

// String is the spec as a diff or an explanation shows it.
func (c *ChannelSpec) String() string {
	if c == nil {
		return "(none)"
	}
	var parts []string
	if c.Path != "" {
		parts = append(parts, fmt.Sprintf("path %q", c.Path))
	}
	if len(c.Query) > 0 {
		parts = append(parts, "query ["+strings.Join(c.Query, ", ")+"]")
	}
	return strings.Join(parts, " ")
}

// channel checks services[i].channel (at path p) and compiles it; nil when
// there is none or it is invalid.
func (c *compiler) channel(p string, spec *ChannelSpec) *ChannelPattern {
	if spec == nil {
		return nil
	}
	cp, probs := compileChannel(*spec)
	for _, pr := range probs {
		field := p
		if pr.field != "" {
			field += "." + pr.field
		}
		c.add(field, "%s", pr.msg)
	}
	return cp
}
