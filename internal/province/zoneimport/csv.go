package zoneimport

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/anysched/anysched/internal/province/topology"
)

// CSV columns, by header name (any order; latitude/longitude also read).
const (
	colNetwork = "network"
	colRegion  = "region"
	colZone    = "zone"
	colLat     = "lat"
	colLon     = "lon"
)

var columnAliases = map[string]string{
	colNetwork: colNetwork, colRegion: colRegion, colZone: colZone,
	colLat: colLat, "latitude": colLat, colLon: colLon, "longitude": colLon,
}

// row is one network of a CSV, before zones are named.
type row struct {
	network   string
	netPos    pos
	region    string
	regionPos pos
	zone      string // "" for the default
	zonePos   pos
	loc       *topology.Location
	locPos    pos
}

// ReadCSV reads an IP plan as CSV: a header row naming the columns
// network and region, optionally zone and lat, lon (in any order); lines
// starting with '#' are comments. A row without a zone goes to the zone
// "<region>-<n>": one per region and location, numbered in order of
// appearance. A zone without lat, lon is at its region's location.
// source names the file in the error.
func ReadCSV(data []byte, source string, o Options) (*Plan, error) {
	b := newBuilder(o)
	data = bytes.TrimPrefix(data, []byte("\ufeff")) // spreadsheets write a BOM
	r := csv.NewReader(bytes.NewReader(data))
	r.Comment = '#'
	r.FieldsPerRecord = -1
	r.TrimLeadingSpace = true
	r.ReuseRecord = true

	cols, ok := b.header(r)
	if !ok {
		return nil, &Error{Source: source, Problems: b.errs}
	}
	var rows []row
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if !errors.As(err, &pe) {
				b.add(pos{key: "(file)"}, "%v", err)
				break
			}
			b.add(pos{line: pe.Line, col: max(1, pe.Column), key: "csv"}, "%v", pe.Err)
			continue
		}
		line, _ := r.FieldPos(0)
		if len(rec) != len(cols) {
			fields := "fields"
			if len(rec) == 1 {
				fields = "field"
			}
			b.add(pos{line: line, col: 1, key: cols[0]}, "%d %s, the header has %d", len(rec), fields, len(cols))
			continue
		}
		at := func(i int) pos {
			l, c := r.FieldPos(i)
			return pos{line: l, col: c, key: cols[i]}
		}
		var rw row
		var lat, lon string
		var latI, lonI int
		for i, v := range rec {
			v = strings.TrimSpace(v)
			switch cols[i] {
			case colNetwork:
				rw.network, rw.netPos = v, at(i)
			case colRegion:
				rw.region, rw.regionPos = v, at(i)
			case colZone:
				rw.zone, rw.zonePos = v, at(i)
			case colLat:
				lat, latI = v, i
			case colLon:
				lon, lonI = v, i
			}
		}
		if rw.region == "" {
			b.add(rw.regionPos, "required")
		}
		if lat != "" || lon != "" {
			rw.locPos = at(latI)
			rw.loc = b.csvLocation(at(latI), at(lonI), lat, lon)
		}
		rows = append(rows, rw)
	}
	if len(rows) == 0 && len(b.errs) == 0 {
		b.add(pos{line: 1, col: 1, key: cols[0]}, "no networks after the header")
	}
	b.csvZones(rows)
	return b.finish(source)
}

// header reads the header row: the columns by name, each once.
func (b *builder) header(r *csv.Reader) ([]string, bool) {
	rec, err := r.Read()
	if errors.Is(err, io.EOF) {
		b.add(pos{line: 1, col: 1, key: "header"}, "empty file: want a header row naming the columns network, region (and optionally zone, lat, lon)")
		return nil, false
	}
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			b.add(pos{line: pe.Line, col: max(1, pe.Column), key: "header"}, "%v", pe.Err)
		} else {
			b.add(pos{key: "(file)"}, "%v", err)
		}
		return nil, false
	}
	cols := make([]string, len(rec))
	seen := map[string]int{}
	ok := true
	for i, h := range rec {
		line, col := r.FieldPos(i)
		p := pos{line: line, col: col, key: "header"}
		name, known := columnAliases[strings.ToLower(strings.TrimSpace(h))]
		switch {
		case !known:
			b.add(p, "unknown column %q (want network, region, zone, lat, lon)", h)
			ok = false
		case seen[name] > 0:
			b.add(p, "column %q given twice (also column %d)", name, seen[name])
			ok = false
		default:
			seen[name] = i + 1
		}
		cols[i] = name
	}
	for _, need := range []string{colNetwork, colRegion} {
		if seen[need] == 0 && ok {
			line, _ := r.FieldPos(0)
			b.add(pos{line: line, col: 1, key: "header"}, "no %s column (the header names %s)", need, strings.Join(rec, ","))
			ok = false
		}
	}
	if ok && (seen[colLat] == 0) != (seen[colLon] == 0) {
		line, _ := r.FieldPos(0)
		b.add(pos{line: line, col: 1, key: "header"}, "lat and lon come together: the header has only one of them")
		ok = false
	}
	return cols, ok
}

// csvLocation parses a row's lat, lon; nil when it is wrong (reported).
func (b *builder) csvLocation(latPos, lonPos pos, lat, lon string) *topology.Location {
	if lat == "" || lon == "" {
		p := latPos
		if lon == "" {
			p = lonPos
		}
		b.add(p, "lat and lon come together: one is empty")
		return nil
	}
	la, err1 := strconv.ParseFloat(lat, 64)
	if err1 != nil {
		b.add(latPos, "not a number: %q", lat)
	}
	lo, err2 := strconv.ParseFloat(lon, 64)
	if err2 != nil {
		b.add(lonPos, "not a number: %q", lon)
	}
	if err1 != nil || err2 != nil {
		return nil
	}
	ok := true
	if la != la || la < -90 || la > 90 {
		b.add(latPos, "latitude %v is out of range [-90, 90]", la)
		ok = false
	}
	if lo != lo || lo < -180 || lo > 180 {
		b.add(lonPos, "longitude %v is out of range [-180, 180]", lo)
		ok = false
	}
	if !ok {
		return nil
	}
	return &topology.Location{Lat: la, Lon: lo}
}

// csvZones groups the rows into zones: by the zone column where given,
// else by region and location under a default name that no given zone
// takes.
func (b *builder) csvZones(rows []row) {
	named := map[string]bool{}
	for _, rw := range rows {
		if rw.zone != "" {
			named[rw.zone] = true
		}
	}
	type key struct {
		region string
		loc    topology.Location
		hasLoc bool
	}
	defaults := map[key]string{}
	count := map[string]int{}
	for _, rw := range rows {
		// At its region's location is no location of its own: such rows
		// share the zone of rows that give none.
		if r := b.regionByName(rw.region); rw.loc != nil && r != nil && r.Location != nil && *r.Location == *rw.loc {
			rw.loc = nil
		}
		name := rw.zone
		zp := rw.zonePos
		if name == "" {
			k := key{region: rw.region}
			if rw.loc != nil {
				k.loc, k.hasLoc = *rw.loc, true
			}
			if name = defaults[k]; name == "" {
				for name == "" || named[name] {
					count[rw.region]++
					name = fmt.Sprintf("%s-%d", rw.region, count[rw.region])
				}
				defaults[k] = name
			}
			zp = rw.netPos
		}
		z := b.zone(name, zp)
		switch {
		case rw.region == "": // reported
		case z.region == "":
			z.region, z.regionPos = rw.region, rw.regionPos
			b.checkRegion(rw.regionPos, rw.region, "")
		case z.region != rw.region:
			b.add(rw.regionPos, "zone %q is in region %q at %s, here in %q", name, z.region, z.regionPos, rw.region)
		}
		if rw.loc != nil {
			switch {
			case z.loc == nil:
				z.loc, z.locPos = rw.loc, rw.locPos
			case *z.loc != *rw.loc:
				b.add(rw.locPos, "zone %q is at %v,%v at %s, here at %v,%v", name, z.loc.Lat, z.loc.Lon, z.locPos, rw.loc.Lat, rw.loc.Lon)
			}
		}
		b.network(z, rw.network, rw.netPos)
	}
}
