package topology

import (
	"fmt"
	"strings"
)

// Placeholder is one {name} a service's url_template may use. The names
// below are the one list: Compile checks templates against it and compiles
// them into Templates, and steer renders a Template by switching on these
// values, never on names.
type Placeholder uint8

// The placeholders, and what steer puts in their place.
const (
	Literal      Placeholder = iota // not a placeholder: a TemplatePart's literal text
	PlaceServer                     // {server}: the server's address, host:port
	PlaceHost                       // {host}: the server's IP alone (IPv6 in brackets)
	PlacePort                       // {port}: the server's port
	PlaceChannel                    // {channel}: the service's channel (ChannelSpec), by default the path's first segment
	PlacePath                       // {path}: the request path without its leading slash
	PlaceQuery                      // {query}: the request's raw query string
	PlaceBitrate                    // {bitrate}: the chosen bitrate in kbps
	PlaceService                    // {service}: the service's name
	PlaceRegion                     // {region}: the server's region
	numPlaceholders
)

var placeholderNames = [numPlaceholders]string{
	Literal: "", PlaceServer: "server", PlaceHost: "host", PlacePort: "port", PlaceChannel: "channel",
	PlacePath: "path", PlaceQuery: "query", PlaceBitrate: "bitrate", PlaceService: "service", PlaceRegion: "region",
}

// String is the placeholder's name, without braces.
func (p Placeholder) String() string {
	if p < numPlaceholders {
		return placeholderNames[p]
	}
	return fmt.Sprintf("Placeholder(%d)", uint8(p))
}

// Placeholders lists every placeholder, in order.
func Placeholders() []Placeholder {
	out := make([]Placeholder, 0, numPlaceholders-1)
	for p := Literal + 1; p < numPlaceholders; p++ {
		out = append(out, p)
	}
	return out
}

// ParsePlaceholder returns the placeholder with this name (without braces).
func ParsePlaceholder(name string) (Placeholder, bool) {
	for p := Literal + 1; p < numPlaceholders; p++ {
		if placeholderNames[p] == name {
			return p, true
		}
	}
	return Literal, false
}

// TemplatePart is a run of literal text or one placeholder.
type TemplatePart struct {
	Field Placeholder // Literal for text
	Text  string      // the literal text, when Field is Literal
}

// Template is a url_template compiled into its parts, so that rendering a
// redirect is appends into a reused buffer.
type Template []TemplatePart

// Has reports whether t uses placeholder p.
func (t Template) Has(p Placeholder) bool {
	for _, part := range t {
		if part.Field == p && p != Literal {
			return true
		}
	}
	return false
}

// ParseTemplate compiles a url_template. It checks the placeholders' syntax
// and names only; Compile checks the rest (scheme, {server} or {host}).
func ParseTemplate(tpl string) (Template, error) {
	t, unknown, err := parseTemplate(tpl)
	if err != nil {
		return nil, err
	}
	if len(unknown) > 0 {
		return nil, unknownPlaceholder(unknown[0])
	}
	return t, nil
}

// parseTemplate splits tpl into parts; names it does not know are returned
// in unknown (each once per use), so that a caller can report every one.
func parseTemplate(tpl string) (t Template, unknown []string, err error) {
	lit := 0 // start of the pending literal
	flush := func(end int) {
		if end > lit {
			t = append(t, TemplatePart{Text: tpl[lit:end]})
		}
	}
	for i := 0; i < len(tpl); i++ {
		switch tpl[i] {
		case '{':
			end := strings.IndexByte(tpl[i:], '}')
			if end < 0 {
				return nil, nil, fmt.Errorf("unclosed '{' at offset %d", i)
			}
			name := tpl[i+1 : i+end]
			if name == "" || strings.ContainsAny(name, "{ ") {
				return nil, nil, fmt.Errorf("malformed placeholder at offset %d", i)
			}
			flush(i)
			if p, ok := ParsePlaceholder(name); ok {
				t = append(t, TemplatePart{Field: p})
			} else {
				unknown = append(unknown, name)
			}
			i += end
			lit = i + 1
		case '}':
			return nil, nil, fmt.Errorf("unmatched '}' at offset %d", i)
		}
	}
	flush(len(tpl))
	return t, unknown, nil
}

func unknownPlaceholder(name string) error {
	known := make([]string, 0, numPlaceholders-1)
	for _, p := range Placeholders() {
		known = append(known, p.String())
	}
	return fmt.Errorf("unknown placeholder {%s} (known: %s)", name, strings.Join(known, ", "))
}
