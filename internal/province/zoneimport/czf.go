package zoneimport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/anysched/anysched/internal/province/topology"
)

// czfReader walks a Coverage Zone File token by token, so every network
// keeps its JSON path and line (and a zone named twice is seen, which
// decoding into a map would hide).
type czfReader struct {
	b     *builder
	data  []byte
	dec   *json.Decoder
	lines []int // offset of each line's start
}

// errStop ends the walk: the JSON is broken past recovery (reported).
var errStop = errors.New("stop")

// ReadCZF reads a Traffic Router Coverage Zone File:
//
//	{"revision": "...", "customerName": "...",
//	 "coverageZones": {"<zone>": {"network": ["10.0.0.0/24", ...],
//	   "network6": ["2001:db8::/48", ...],
//	   "coordinates": {"latitude": 31.8, "longitude": 117.2}}}}
//
// Zones keep their names and come in file order; each gets its region as
// Options say. source names the file in the error.
func ReadCZF(data []byte, source string, o Options) (*Plan, error) {
	b := newBuilder(o)
	c := &czfReader{b: b, data: data, dec: json.NewDecoder(bytes.NewReader(data)), lines: []int{0}}
	c.dec.UseNumber()
	for i, ch := range data {
		if ch == '\n' {
			c.lines = append(c.lines, i+1)
		}
	}
	if err := c.document(); err != nil {
		return nil, &Error{Source: source, Problems: b.errs}
	}
	return b.finish(source)
}

// at is path at the decoder's position.
func (c *czfReader) at(path string) pos {
	off := int(c.dec.InputOffset())
	line := sort.Search(len(c.lines), func(i int) bool { return c.lines[i] > off }) // lines[line-1] <= off
	if off > 0 && off <= len(c.data) && line > 1 && c.lines[line-1] == off {
		line-- // the token ended just before a line break
	}
	return pos{line: max(1, line), key: path}
}

// token reads the next token; a syntax error is reported at path and stops
// the walk.
func (c *czfReader) token(path string) (json.Token, error) {
	t, err := c.dec.Token()
	if err == nil {
		return t, nil
	}
	if errors.Is(err, io.EOF) {
		c.b.add(c.at(path), "the file ends early")
		return nil, errStop
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		p := c.at(path)
		p.line = c.lineOf(int(se.Offset))
		c.b.add(p, "invalid JSON: %v", se)
	} else {
		c.b.add(c.at(path), "invalid JSON: %v", err)
	}
	return nil, errStop
}

func (c *czfReader) lineOf(off int) int {
	return max(1, sort.Search(len(c.lines), func(i int) bool { return c.lines[i] > off }))
}

// object reads the '{' of an object at path; false (reported) when the
// value is something else, which is then skipped.
func (c *czfReader) open(path string, want json.Delim) (bool, error) {
	t, err := c.token(path)
	if err != nil {
		return false, err
	}
	if d, ok := t.(json.Delim); ok && d == want {
		return true, nil
	}
	kind := "an object"
	if want == '[' {
		kind = "a list"
	}
	c.b.add(c.at(path), "want %s, not %s", kind, describe(t))
	return false, c.skipOpened(t)
}

// skipOpened skips the rest of a value whose first token was t.
func (c *czfReader) skipOpened(t json.Token) error {
	d, ok := t.(json.Delim)
	if !ok || d == '}' || d == ']' {
		return nil
	}
	for depth := 1; depth > 0; {
		t, err := c.token("")
		if err != nil {
			return err
		}
		if d, ok := t.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}

// skip skips the next value.
func (c *czfReader) skip(path string) error {
	t, err := c.token(path)
	if err != nil {
		return err
	}
	return c.skipOpened(t)
}

// keys reads an object's members after its '{', calling member for each
// key (which must read the key's value).
func (c *czfReader) keys(path string, member func(key string) error) error {
	for c.dec.More() {
		t, err := c.token(path)
		if err != nil {
			return err
		}
		k, _ := t.(string) // the decoder only gives strings as keys
		if err := member(k); err != nil {
			return err
		}
	}
	_, err := c.token(path) // '}'
	return err
}

func (c *czfReader) document() error {
	ok, err := c.open("(document)", '{')
	if err != nil || !ok {
		return errStop
	}
	seen := map[string]bool{}
	err = c.keys("(document)", func(k string) error {
		if seen[k] {
			c.b.add(c.at(k), "%q given twice", k)
		}
		seen[k] = true
		switch k {
		case "coverageZones":
			return c.zones()
		case "revision", "customerName":
			return c.skip(k)
		default:
			c.b.add(c.at(k), "unknown key %q (a coverage zone file has coverageZones, revision, customerName)", k)
			return c.skip(k)
		}
	})
	if err != nil {
		return err
	}
	if _, err := c.dec.Token(); !errors.Is(err, io.EOF) {
		c.b.add(c.at("(document)"), "data after the document")
	}
	if !seen["coverageZones"] {
		c.b.add(pos{line: 1, key: "coverageZones"}, "required")
	}
	return nil
}

func (c *czfReader) zones() error {
	const path = "coverageZones"
	ok, err := c.open(path, '{')
	if err != nil || !ok {
		return err
	}
	return c.keys(path, func(name string) error {
		zp := c.at(path + "." + name)
		if _, dup := c.b.byName[name]; dup {
			c.b.add(zp, "zone %q given twice (first at %s)", name, c.b.zones[c.b.byName[name]].pos)
			return c.skip(zp.key)
		}
		return c.zone(c.b.zone(name, zp))
	})
}

func (c *czfReader) zone(z *zone) error {
	ok, err := c.open(z.pos.key, '{')
	if err != nil || !ok {
		return err
	}
	seen := map[string]bool{}
	err = c.keys(z.pos.key, func(k string) error {
		p := z.pos.key + "." + k
		if seen[k] {
			c.b.add(c.at(p), "%q given twice", k)
		}
		seen[k] = true
		switch k {
		case "network":
			return c.networks(z, p, true)
		case "network6":
			return c.networks(z, p, false)
		case "coordinates":
			return c.coordinates(z, p)
		default:
			c.b.add(c.at(p), "unknown key %q (a coverage zone has network, network6, coordinates)", k)
			return c.skip(p)
		}
	})
	if err != nil {
		return err
	}
	c.region(z)
	return nil
}

func (c *czfReader) networks(z *zone, path string, v4 bool) error {
	ok, err := c.open(path, '[')
	if err != nil || !ok {
		return err
	}
	for i := 0; c.dec.More(); i++ {
		t, err := c.token(path)
		if err != nil {
			return err
		}
		p := c.at(path + "[" + strconv.Itoa(i) + "]")
		s, isString := t.(string)
		if !isString {
			c.b.add(p, "want a network as a string, not %s", describe(t))
			z.bad++
			if err := c.skipOpened(t); err != nil {
				return err
			}
			continue
		}
		pfx, msg := parseNetwork(s)
		switch {
		case msg != "":
			c.b.add(p, "%s", msg)
			z.bad++
		case v4 && !pfx.Addr().Is4():
			c.b.add(p, "%s is IPv6: IPv6 networks go in network6", s)
			z.bad++
		case !v4 && pfx.Addr().Is4():
			c.b.add(p, "%s is IPv4: IPv4 networks go in network", s)
			z.bad++
		default:
			z.nets = append(z.nets, pfx)
			z.netPos = append(z.netPos, p)
		}
	}
	_, err = c.token(path) // ']'
	return err
}

func (c *czfReader) coordinates(z *zone, path string) error {
	ok, err := c.open(path, '{')
	if err != nil || !ok {
		return err
	}
	var lat, lon *float64
	start := c.at(path)
	err = c.keys(path, func(k string) error {
		p := path + "." + k
		t, err := c.token(p)
		if err != nil {
			return err
		}
		var dst **float64
		switch k {
		case "latitude":
			dst = &lat
		case "longitude":
			dst = &lon
		default:
			c.b.add(c.at(p), "unknown key %q (coordinates have latitude, longitude)", k)
			return c.skipOpened(t)
		}
		n, isNum := t.(json.Number)
		f, ferr := n.Float64()
		if !isNum || ferr != nil {
			c.b.add(c.at(p), "want a number, not %s", describe(t))
			return c.skipOpened(t)
		}
		*dst = &f
		return nil
	})
	if err != nil {
		return err
	}
	switch {
	case lat == nil || lon == nil:
		missing := "latitude"
		if lat != nil {
			missing = "longitude"
		}
		if lat == nil && lon == nil {
			missing = "latitude and longitude"
		}
		c.b.add(start, "%s required", missing)
	case c.b.location(start, *lat, *lon):
		z.loc, z.locPos = &topology.Location{Lat: *lat, Lon: *lon}, start
	}
	return nil
}

// region gives z its region: from the region map, from its name, or the
// region nearest its coordinates, in that order of what Options give.
func (c *czfReader) region(z *zone) {
	o := c.b.o
	switch {
	case o.RegionMap != nil:
		r, ok := o.RegionMap[z.name]
		if !ok {
			c.b.add(z.pos, "zone %q is not in the region map %s", z.name, o.RegionMapName)
			return
		}
		z.region = r
		c.b.checkRegion(z.pos, r, " (from the region map "+o.RegionMapName+")")
	case o.RegionFromName:
		r := z.name
		if i := strings.IndexAny(r, "-_"); i > 0 {
			r = r[:i]
		}
		z.region = r
		c.b.checkRegion(z.pos, r, " (from the zone's name)")
	case z.loc != nil:
		if r := c.b.nearestRegion(*z.loc); r != nil {
			z.region = r.Name
		} else {
			c.b.add(z.pos, "no region has a location to find the one nearest this zone: give a region map or use the zone names")
		}
	default:
		c.b.add(z.pos, "no coordinates to find the zone's region by: give coordinates, a region map, or use the zone names")
	}
}

// describe names a JSON token's kind for a message.
func describe(t json.Token) string {
	switch v := t.(type) {
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		if v == '[' {
			return "a list"
		}
		return fmt.Sprintf("%q", string(v))
	case string:
		return fmt.Sprintf("the string %q", v)
	case json.Number:
		return "the number " + v.String()
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", t)
}
