package balance

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Effective is c with every zero that stands for a documented default
// replaced by that default, so an operator reads the policy in force
// rather than zeros. It means the same to every policy as c does (only
// zeros that are relative, such as p2c.conn_ref, stay; chash.window is
// no longer used).
func (c Config) Effective() Config {
	e := c
	e.Adaptive = c.Adaptive.withDefaults()
	e.Rank = c.Rank.withDefaults()
	if e.SWRR.MaxFails == 0 {
		e.SWRR.MaxFails = 1
	}
	if e.CHash.VirtualNodes == 0 {
		e.CHash.VirtualNodes = 160
	}
	if e.CHash.HalfLife == 0 {
		e.CHash.HalfLife = defaultHalfLife
	}
	if e.CHash.MinLoad == 0 {
		e.CHash.MinLoad = defaultMinLoad
	}
	if e.SlowStart.Aggression == 0 {
		e.SlowStart.Aggression = 1
	}
	if e.SlowStart.MinShare == 0 {
		e.SlowStart.MinShare = 0.1
	}
	if e.P2C.CPUWeight == 0 && e.P2C.BandwidthWeight == 0 && e.P2C.ConnWeight == 0 {
		e.P2C.CPUWeight, e.P2C.BandwidthWeight, e.P2C.ConnWeight = 1, 1, 1
	}
	if e.P2C.PickMbps == 0 {
		e.P2C.PickMbps = 4
	}
	if len(c.Weights) > 0 {
		e.Weights = maps.Clone(c.Weights)
	}
	return e
}

// YAML renders c as a document ParseConfig reads back to c (durations as
// "1m0s", selections and keys by name).
func (c Config) YAML() ([]byte, error) {
	b, err := yaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("balance: rendering the policy: %w", err)
	}
	return b, nil
}

// Diff lists what differs between two policies, one line per field path in
// document order ("chash.epsilon: 0.25 -> 0.5", "weights.hefei-1-a: - ->
// 50"); nil when they are the same.
func Diff(from, to Config) []string {
	a, b := flatten(from), flatten(to)
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		va, oka := a[k]
		vb, okb := b[k]
		if oka && okb && va == vb {
			continue
		}
		if !oka {
			va = "-"
		}
		if !okb {
			vb = "-"
		}
		out = append(out, fmt.Sprintf("%s: %s -> %s", k, va, vb))
	}
	return out
}

// flatten is c's fields by dotted path, as the document names them.
func flatten(c Config) map[string]string {
	out := map[string]string{}
	var n yaml.Node
	if err := n.Encode(c); err != nil {
		return out
	}
	var walk func(path string, n *yaml.Node)
	walk = func(path string, n *yaml.Node) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				if path != "" {
					k = path + "." + k
				}
				walk(k, n.Content[i+1])
			}
		case yaml.SequenceNode:
			vals := make([]string, len(n.Content))
			for i, v := range n.Content {
				vals[i] = v.Value
			}
			out[path] = "[" + strings.Join(vals, ", ") + "]"
		default:
			if n.Tag == "!!null" {
				return
			}
			out[path] = n.Value
		}
	}
	walk("", &n)
	return out
}
