package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/anysched/anysched/internal/province/topology"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/status"
)

// getCmd prints the stored topology, or one of its sections.
func getCmd(ctx context.Context, e *env, args []string) error {
	kinds := []string{"topology", "regions", "nodes", "servers", "zones", "services"}
	what := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		what, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	o := outputFlag(fs, formatTable, formatYAML, formatJSON)
	if err := e.parseLeading(fs, args); err != nil {
		return err
	}
	rest := fs.Args()
	if what == "" && len(rest) > 0 { // get -o json nodes
		what, rest = rest[0], rest[1:]
	}
	switch {
	case len(rest) > 0:
		return usagef("unexpected argument %q", rest[0])
	case what == "":
		return usagef("get what? %s", orList(kinds))
	case !slices.Contains(kinds, what):
		return usagef("cannot get %q: want %s", what, orList(kinds))
	}
	resp, err := e.admin.GetTopology(ctx, &pb.GetTopologyRequest{})
	if err != nil {
		return err
	}
	if what == "topology" && o.format != formatJSON {
		// The document as stored, comments and all: what an edit starts from.
		_, err := e.out.Write(resp.GetDocument())
		return err
	}
	t, err := topology.Decode(resp.GetDocument())
	if err != nil {
		return fmt.Errorf("the server sent a document this schedctl cannot read: %w", err)
	}
	data, tab := section(t, what)
	if what == "servers" {
		data, tab = servers(t, e.effectiveWeights(ctx))
	}
	return render(e.out, o, data, func(w io.Writer) error {
		if err := writeTables(w, tab); err != nil {
			return err
		}
		_, err := fmt.Fprintf(w, "revision %d\n", resp.GetRevision())
		return err
	})
}

// section is one part of the topology: its data for -o json and yaml, and
// its table (nil for the whole topology, which prints as stored).
func section(t *topology.Topology, what string) (any, *table) {
	switch what {
	case "regions":
		tab := newTable("NAME", "LAT", "LON", "FALLBACK")
		for _, r := range t.Regions {
			lat, lon := latLon(r.Location)
			tab.add(r.Name, lat, lon, strings.Join(r.Fallback, ","))
		}
		return t.Regions, tab
	case "nodes":
		tab := newTable("NAME", "REGION", "SERVERS", "LAT", "LON")
		for _, n := range t.Nodes {
			lat, lon := latLon(n.Location)
			tab.add(n.Name, n.Region, len(n.Servers), lat, lon)
		}
		return t.Nodes, tab
	case "servers":
		return servers(t, nil)
	case "zones":
		tab := newTable("NAME", "REGION", "NETWORKS")
		for _, z := range t.Zones {
			nets := strings.Join(z.Networks, ",")
			if len(z.Networks) > 4 {
				nets = fmt.Sprintf("%s,... (%d)", strings.Join(z.Networks[:4], ","), len(z.Networks))
			}
			tab.add(z.Name, z.Region, nets)
		}
		return t.Zones, tab
	case "services":
		tab := newTable("NAME", "HOSTNAMES", "SELECTION", "BITRATES_KBPS")
		for _, s := range t.Services {
			sel := s.Selection
			if sel == "" {
				sel = topology.DefaultSelection
			}
			tab.add(s.Name, strings.Join(s.Hostnames, ","), sel, strings.Trim(fmt.Sprint(s.BitratesKbps), "[]"))
		}
		return t.Services, tab
	}
	return t, nil
}

// serverRow is a server with the node and region it is in: the document
// nests servers in nodes, an operator looks one up by name. Effective is
// set where the center's in-node policies weigh it otherwise than the
// topology (the balance policy's weights, slow start, adaptive weights).
type serverRow struct {
	Node            string `json:"node" yaml:"node"`
	Region          string `json:"region" yaml:"region"`
	topology.Server `yaml:",inline"`
	Effective       []*pb.ServerWeight `json:"effective_weights,omitempty" yaml:"effective_weights,omitempty"`
}

// servers is the servers' table; weights (by server name, from the
// center's GetBalance) fill in effective weights where they differ.
func servers(t *topology.Topology, weights map[string][]*pb.ServerWeight) ([]serverRow, *table) {
	var rows []serverRow
	tab := newTable("NAME", "NODE", "REGION", "ADDRESS", "WEIGHT", "BANDWIDTH_MBPS")
	for _, n := range t.Nodes {
		for _, s := range n.Servers {
			ws := weights[s.Name]
			rows = append(rows, serverRow{n.Name, n.Region, s, ws})
			weight := fmt.Sprint(s.Weight)
			if s.Weight == 0 {
				weight = fmt.Sprint(topology.DefaultWeight)
			}
			if len(ws) > 0 {
				weight = effectiveText(ws)
			}
			tab.add(s.Name, n.Name, n.Region, s.Address, weight, s.Capacity.BandwidthMbps)
		}
	}
	return rows, tab
}

// effectiveText is a server's effective weight and its topology weight,
// "60 (topology 100)"; with policies that weigh it differently, each named:
// "60 swrr, 80 p2c (topology 100)".
func effectiveText(ws []*pb.ServerWeight) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = strconv.FormatFloat(w.GetEffective(), 'f', -1, 64)
		if len(ws) > 1 {
			policy, _, _ := strings.Cut(w.GetWhy(), ":")
			parts[i] += " " + policy
		}
	}
	return fmt.Sprintf("%s (topology %d)", strings.Join(parts, ", "), ws[0].GetTopology())
}

// effectiveWeights asks the center which servers its policies weigh
// otherwise than the topology, by name. Without an answer (a center older
// than this schedctl) the topology's weights are all there is: said once on
// standard error, not a failure of get.
func (e *env) effectiveWeights(ctx context.Context) map[string][]*pb.ServerWeight {
	resp, err := e.admin.GetBalance(ctx, &pb.GetBalanceRequest{})
	if err != nil {
		fmt.Fprintf(e.errOut, "schedctl get: effective weights unknown (the topology's are shown): %v\n", apiError{status.Convert(err)})
		return nil
	}
	out := map[string][]*pb.ServerWeight{}
	for _, w := range resp.GetWeights() {
		out[w.GetServer()] = append(out[w.GetServer()], w)
	}
	return out
}

// latLon prints a location to 4 decimals (about 10 m); "-" for none.
func latLon(l *topology.Location) (lat, lon string) {
	if l == nil {
		return "-", "-"
	}
	return strconv.FormatFloat(l.Lat, 'f', 4, 64), strconv.FormatFloat(l.Lon, 'f', 4, 64)
}
