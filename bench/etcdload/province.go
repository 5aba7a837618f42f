package main

import (
	"bytes"
	"fmt"

	"github.com/anysched/anysched/data"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
)

// city is one region of the bench's province: its servers (by node) and
// its zones' locations, and the viewers it has at prime time.
type city struct {
	name    string
	index   int
	servers []string // names, node by node
	nodes   []string
	nodeOf  []int // server -> node index
	zones   []topology.Location
	viewers int
}

// buildProvince lays out the sample province (the 16 Anhui cities,
// topogen's layout: about 50 servers a node, 25 zones a city) with servers
// servers, and shares sessions out over its cities by their census
// populations (topogen.AnhuiSplit), as docs/capacity.md does.
func buildProvince(servers, sessions int) ([]city, error) {
	cities, err := topogen.ReadCities(bytes.NewReader(data.AnhuiCities))
	if err != nil {
		return nil, err
	}
	n := len(cities)
	if servers < n {
		return nil, fmt.Errorf("-servers %d: at least one a city (%d)", servers, n)
	}
	nodes := max(n, servers/50)
	t := topogen.Large(cities, topogen.LargeOptions{Regions: n, Nodes: nodes, Servers: servers, Zones: 25 * n, Networks: 25 * n})
	split := topogen.AnhuiSplit(sessions)
	byName := map[string]*city{}
	out := make([]city, len(t.Regions))
	for i, r := range t.Regions {
		out[i] = city{name: r.Name, index: i}
		byName[r.Name] = &out[i]
	}
	for _, nd := range t.Nodes {
		c := byName[nd.Region]
		for _, s := range nd.Servers {
			c.servers = append(c.servers, s.Name)
			c.nodeOf = append(c.nodeOf, len(c.nodes))
		}
		c.nodes = append(c.nodes, nd.Name)
	}
	for _, z := range t.Zones {
		c := byName[z.Region]
		c.zones = append(c.zones, *z.Location)
	}
	for _, s := range split {
		c, ok := byName[s.City]
		if !ok {
			return nil, fmt.Errorf("census city %q is not a region of the province", s.City)
		}
		c.viewers = s.N
	}
	return out, nil
}
