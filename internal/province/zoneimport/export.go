package zoneimport

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
	"gopkg.in/yaml.v3"
)

// WriteCSV writes t's zones as ReadCSV reads them: one row per network,
// with the zone's name, and lat, lon only where the zone has its own
// location (else it is at its region's).
func WriteCSV(w io.Writer, t *topology.Topology) error {
	cw := csv.NewWriter(w)
	rec := []string{colNetwork, colRegion, colZone, colLat, colLon}
	if err := cw.Write(rec); err != nil {
		return fmt.Errorf("zoneimport: %w", err)
	}
	for _, z := range t.Zones {
		lat, lon := "", ""
		if z.Location != nil {
			lat, lon = formatFloat(z.Location.Lat), formatFloat(z.Location.Lon)
		}
		for _, n := range z.Networks {
			rec[0], rec[1], rec[2], rec[3], rec[4] = n, z.Region, z.Name, lat, lon
			if err := cw.Write(rec); err != nil {
				return fmt.Errorf("zoneimport: %w", err)
			}
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("zoneimport: %w", err)
	}
	return nil
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// WriteCZF writes t's zones as a Traffic Router Coverage Zone File, in
// the topology's order (encoding/json would sort them). Each zone's
// coordinates are its location, or its region's; the format has no
// region, so reading it back finds each zone's region as ReadCZF's
// Options say (the nearest, by default).
func WriteCZF(w io.Writer, t *topology.Topology) error {
	regionLoc := map[string]*topology.Location{}
	for _, r := range t.Regions {
		regionLoc[r.Name] = r.Location
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "{\n  \"revision\": %q,\n  \"customerName\": \"anysched\",\n  \"coverageZones\": {", strconv.FormatInt(t.Revision, 10))
	for i, z := range t.Zones {
		if i > 0 {
			bw.WriteByte(',')
		}
		var v4, v6 []string
		for _, n := range z.Networks {
			if strings.Contains(n, ":") {
				v6 = append(v6, n)
			} else {
				v4 = append(v4, n)
			}
		}
		fmt.Fprintf(bw, "\n    %s: {\n      \"network\": %s,\n      \"network6\": %s", jsonString(z.Name), jsonList(v4), jsonList(v6))
		loc := z.Location
		if loc == nil {
			loc = regionLoc[z.Region]
		}
		if loc != nil {
			fmt.Fprintf(bw, ",\n      \"coordinates\": {\"latitude\": %s, \"longitude\": %s}", formatFloat(loc.Lat), formatFloat(loc.Lon))
		}
		bw.WriteString("\n    }")
	}
	bw.WriteString("\n  }\n}\n")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("zoneimport: %w", err)
	}
	return nil
}

func jsonString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

func jsonList(l []string) string {
	if len(l) == 0 {
		return "[]"
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, s := range l {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(jsonString(s))
	}
	b.WriteByte(']')
	return b.String()
}

// ReadRegionMap reads which region each CZF zone is in: a YAML mapping
// (zone: region), or a CSV of zone,region rows (a header row zone,region
// is skipped).
func ReadRegionMap(data []byte, source string) (map[string]string, error) {
	trimmed := bytes.TrimSpace(data)
	m := map[string]string{}
	if looksLikeCSV(trimmed) {
		r := csv.NewReader(bytes.NewReader(trimmed))
		r.Comment = '#'
		r.TrimLeadingSpace = true
		r.FieldsPerRecord = 2
		var es yamlstrict.Errors
		for first := true; ; first = false {
			rec, err := r.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				es.Add("", "%v", err)
				if _, ok := err.(*csv.ParseError); !ok {
					break
				}
				continue
			}
			line, _ := r.FieldPos(0)
			if first && strings.EqualFold(rec[0], "zone") && strings.EqualFold(rec[1], "region") {
				continue
			}
			zone, region := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1])
			if _, dup := m[zone]; dup {
				es.Add("line "+strconv.Itoa(line), "zone %q given twice", zone)
			}
			m[zone] = region
		}
		if len(es) > 0 {
			return nil, &Error{Source: source, Problems: es}
		}
		return m, nil
	}
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("zoneimport: %s: %w", source, err)
	}
	return m, nil
}

// looksLikeCSV: the first line that is not a comment has a comma and no
// colon (a YAML mapping has a colon on every line).
func looksLikeCSV(data []byte) bool {
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		return strings.Contains(l, ",") && !strings.Contains(l, ":")
	}
	return false
}
