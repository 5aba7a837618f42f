package steer

import (
	"fmt"
	"net/netip"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/balance"
)

// A service's channel pattern (topology.ChannelSpec) says where its
// requests name the channel. When it finds none (the path does not match,
// the parameter is absent) or finds one that is not a clean path piece
// (empty, a dot segment, an encoded slash: it is copied into the edge
// URL's path), the request is treated as if the service had no pattern
// for {channel} (the first path segment, as the explain URL's "/CHANNEL"
// relies on) and keyed by its whole path plus the listed parameters, as
// Traffic Router keys a path its consistentHashRegex does not match: an
// unrelated request (a crossdomain.xml, a VOD title) gets an object of
// its own instead of sharing one channel's server.

// patternChannel is the channel p finds in a request, if it is clean.
func patternChannel(p *topology.ChannelPattern, path, query string) (string, bool) {
	ch, ok := p.Channel(path, query)
	if !ok || ch == "" || PathReason(ch) != "" {
		return "", false
	}
	return ch, true
}

// requestKey is how a request to a service is keyed: the base and the
// parameters of its content key, and whether the service's channel pattern
// found a clean channel (then base is that {channel}). It is the one place
// that decides them; Channel, ContentKey, ContentHash and ExplainChannel
// all read it, so the key hashed, rendered and explained is one key. It
// allocates only for a pattern compiled to regexp.
type requestKey struct {
	base    string   // the channel, or the path's part the key is built on
	query   []string // the parameters that join the key
	matched bool     // the service's pattern found a clean channel
}

func (e *Engine) requestKey(service int32, path, rawQuery string) requestKey {
	p := e.snap.Services[service].Channel
	if p == nil {
		o := e.keyOptions()
		return requestKey{base: balance.KeyBase(path, o.By), query: o.Query}
	}
	if ch, ok := patternChannel(p, path, rawQuery); ok {
		return requestKey{base: ch, query: p.Query, matched: true}
	}
	return requestKey{base: balance.KeyBase(path, balance.KeyPath), query: p.Query}
}

// channel is {channel} of a request keyed k: what the pattern found, else
// the path's first segment.
func (k requestKey) channel(path string) string {
	if k.matched {
		return k.base
	}
	return Channel(path)
}

// Channel is the channel of a request path to a service without a channel
// pattern: its first segment (/cctv1/index.m3u8 -> cctv1), or "" for "/"
// (Engine.Channel applies the service's pattern). A path PathReason refuses
// never gets here from an STB; for any other caller a dot segment is "".
func Channel(path string) string {
	ch := balance.KeyBase(path, balance.KeyChannel)
	if ch == "." || ch == ".." || PathReason(ch) == ReasonDotSegment {
		return ""
	}
	return ch
}

// Channel is {channel} of a request to service (an index of the engine's
// snapshot): what the service's channel pattern finds, else the path's
// first segment (Channel). It allocates only for a pattern the topology
// compiled to regexp (topology.MatcherRegexp).
func (e *Engine) Channel(service int32, path, rawQuery string) string {
	if e.snap.Services[service].Channel == nil {
		return Channel(path) // no pattern: no need for the balance policy's key
	}
	return e.requestKey(service, path, rawQuery).channel(path)
}

// keyOptions is the balance policy's content key, for services without a
// channel pattern.
func (e *Engine) keyOptions() balance.KeyOptions {
	if e.balance == nil {
		return balance.KeyOptions{}
	}
	return e.balance.Config().Key
}

// contentHash is the hash of ContentKey, without building the key.
func (e *Engine) contentHash(service int32, path, rawQuery string) uint64 {
	k := e.requestKey(service, path, rawQuery)
	return balance.ContentHashOf(k.base, rawQuery, k.query)
}

// ContentKey is the key consistent hashing (selection chash) keeps on one
// server for a request to service: with a channel pattern, the channel it
// finds (else the whole path without its leading slash) then the pattern's
// query parameters; without one, balance.ContentKey under the balance
// policy's key.
func (e *Engine) ContentKey(service int32, path, rawQuery string) string {
	k := e.requestKey(service, path, rawQuery)
	return balance.ContentKeyOf(k.base, rawQuery, k.query)
}

// ChannelMatch is where a request's channel and content key came from.
type ChannelMatch struct {
	Pattern string   `json:"pattern,omitempty"` // the service's channel.path
	Query   []string `json:"query,omitempty"`   // parameters joining the key
	// Matcher is how the pattern is matched (topology.MatcherSegments,
	// MatcherRegexp, MatcherQuery), or "first-segment" without a pattern.
	Matcher string `json:"matcher"`
	Matched bool   `json:"matched"` // the pattern found a clean channel
	Channel string `json:"channel"` // {channel}
	Key     string `json:"key"`     // the content key
	Note    string `json:"note,omitempty"`
}

// MatcherFirstSegment is ChannelMatch.Matcher for a service without a
// channel pattern.
const MatcherFirstSegment = "first-segment"

// ExplainChannel says how the channel and content key of a request to
// service are found. It allocates freely; it is not on the STB path.
func (e *Engine) ExplainChannel(service int32, path, rawQuery string) ChannelMatch {
	k := e.requestKey(service, path, rawQuery)
	m := ChannelMatch{Query: k.query, Matched: k.matched, Channel: k.channel(path), Key: balance.ContentKeyOf(k.base, rawQuery, k.query)}
	p := e.snap.Services[service].Channel
	if p == nil {
		m.Matcher = MatcherFirstSegment
		if e.keyOptions().By == balance.KeyPath {
			m.Note = "the balance policy keys by the whole path"
		}
		return m
	}
	m.Pattern, m.Matcher = p.Path, p.Matcher()
	if k.matched {
		return m
	}
	// Why the pattern found no clean channel.
	switch ch, found := p.Channel(path, rawQuery); {
	case !found && p.Path == "":
		m.Note = fmt.Sprintf("query parameter %s is absent", p.Query[0])
	case !found:
		m.Note = fmt.Sprintf("path %q does not match", path)
	case ch == "":
		m.Note = "the channel found is empty"
	default:
		m.Note = fmt.Sprintf("the channel found, %q, is refused: %s", ch, PathReason(ch))
	}
	return m
}

// step is m as one line of an explanation.
func (m *ChannelMatch) step() string {
	var from string
	switch {
	case m.Matcher == MatcherFirstSegment:
		from = "the first path segment (the service has no channel pattern)"
	case m.Matched && m.Pattern == "":
		from = "query parameter " + m.Query[0]
	case m.Matched:
		from = fmt.Sprintf("path pattern %q (%s matcher)", m.Pattern, m.Matcher)
	default:
		from = fmt.Sprintf("the first path segment: channel pattern %s (%s): %s, so the content key is the whole path",
			(&topology.ChannelSpec{Path: m.Pattern, Query: m.Query}).String(), m.Matcher, m.Note)
	}
	s := fmt.Sprintf("channel %q from %s; content key %q", m.Channel, from, m.Key)
	if m.Matcher == MatcherFirstSegment && m.Note != "" {
		s += " (" + m.Note + ")"
	}
	return s
}

// ContentHash is the hash of req's content key for service, as chash keys
// it: passive outlier detection tells a repeated request for one channel
// from a request for another.
func (e *Engine) ContentHash(service int32, path, rawQuery string) uint64 {
	return e.contentHash(service, path, rawQuery)
}

// ClientHash is the fixed hash of a client address the engine picks by.
func ClientHash(a netip.Addr) uint64 { return addrHash(a) }
