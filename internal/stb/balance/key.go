package balance

import (
	"fmt"
	"strings"
)

// KeyBy says which part of a request path is the content key.
type KeyBy uint8

// Content keys.
const (
	// KeyChannel: the first path segment (/cctv1/index.m3u8 -> cctv1), so
	// every playlist and segment of a channel, at every bitrate, shares one
	// cache. The default, and steer's {channel}. A service whose topology
	// says where its channel is (services[].channel) is keyed by that
	// instead (ContentHashOf).
	KeyChannel KeyBy = iota
	// KeyPath: the whole path without its leading slash, for VOD where each
	// title is its own object.
	KeyPath
)

var keyByNames = [...]string{"channel", "path"}

func (k KeyBy) String() string {
	if int(k) < len(keyByNames) {
		return keyByNames[k]
	}
	return fmt.Sprintf("KeyBy(%d)", k)
}

// MarshalText implements encoding.TextMarshaler.
func (k KeyBy) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler ("channel" or "path").
func (k *KeyBy) UnmarshalText(b []byte) error {
	for i, n := range keyByNames {
		if string(b) == n {
			*k = KeyBy(i)
			return nil
		}
	}
	return fmt.Errorf("unknown content key %q (want channel or path)", b)
}

// KeyOptions say how a request maps to its content key.
type KeyOptions struct {
	By KeyBy `yaml:"by" json:"by"`
	// Query lists the query parameters that are part of the key (a
	// rendition or a programme id, say). Everything else in the query
	// (tokens, session ids, timestamps) is left out, or every STB would have
	// its own key and cache affinity would be lost. The list's order is the
	// key's order, so parameter order in the request does not matter; only
	// a parameter's first occurrence counts; values are kept as sent.
	Query []string `yaml:"query" json:"query"`
}

// KeyBase is the part of a request path a content key is built on, by: the
// first segment or the whole path, without the leading slash; a substring
// of path.
func KeyBase(path string, by KeyBy) string {
	path = strings.TrimPrefix(path, "/")
	if by == KeyChannel {
		if i := strings.IndexByte(path, '/'); i >= 0 {
			path = path[:i]
		}
	}
	return path
}

// queryParam returns the raw value of the first occurrence of name in
// rawQuery, and whether it occurs (a bare "name" occurs with no '=').
func queryParam(rawQuery, name string) (value string, eq, ok bool) {
	for rawQuery != "" {
		var kv string
		kv, rawQuery, _ = strings.Cut(rawQuery, "&")
		k, v, hasEq := strings.Cut(kv, "=")
		if k == name {
			return v, hasEq, true
		}
	}
	return "", false, false
}

// ContentKey is the request's content key: the channel or the path, then
// the whitelisted query parameters that are present, in whitelist order
// ("cctv1?rendition=hd"). Without whitelisted parameters it returns a
// substring of path and does not allocate.
func ContentKey(path, rawQuery string, o KeyOptions) string {
	return ContentKeyOf(KeyBase(path, o.By), rawQuery, o.Query)
}

// ContentKeyOf is the content key of a request whose channel (or path) is
// base: base, then the parameters of query present in rawQuery, as
// ContentKey joins them. A service's channel pattern finds base itself.
// Without parameters present it returns base and does not allocate.
func ContentKeyOf(base, rawQuery string, query []string) string {
	if len(query) == 0 || rawQuery == "" {
		return base
	}
	var b []byte
	for _, name := range query {
		v, eq, ok := queryParam(rawQuery, name)
		if !ok {
			continue
		}
		if b == nil {
			b = append(append(b, base...), '?')
		} else {
			b = append(b, '&')
		}
		b = append(b, name...)
		if eq {
			b = append(append(b, '='), v...)
		}
	}
	if b == nil {
		return base
	}
	return string(b)
}

// ContentHash is HashKey(ContentKey(path, rawQuery, o)) without building the
// key: it never allocates, whitelisted parameters or not. This is what the
// hot path passes to Pick.
func ContentHash(path, rawQuery string, o KeyOptions) uint64 {
	return ContentHashOf(KeyBase(path, o.By), rawQuery, o.Query)
}

// ContentHashOf is HashKey(ContentKeyOf(base, rawQuery, query)) without
// building the key; it never allocates.
func ContentHashOf(base, rawQuery string, query []string) uint64 {
	s := newHasher()
	s.writeString(base)
	first := true
	for _, name := range query {
		v, eq, ok := queryParam(rawQuery, name)
		if !ok {
			continue
		}
		if first {
			s.writeByte('?')
			first = false
		} else {
			s.writeByte('&')
		}
		s.writeString(name)
		if eq {
			s.writeByte('=')
			s.writeString(v)
		}
	}
	return s.sum()
}
