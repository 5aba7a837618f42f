package ctl

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/zoneimport"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"gopkg.in/yaml.v3"
)

// zonesCmd turns an IP plan (CSV, or a Traffic Router Coverage Zone File)
// into the topology's coverage zones, and writes them back out. With -f it
// works on a topology file and needs no admin API; without, it reads the
// center's topology. It never applies anything: the operator applies the
// document it writes with `schedctl apply`, which shows the diff first.
func zonesCmd(ctx context.Context, e *env, args []string) error {
	if e.help && (len(args) == 0 || (args[0] != "import" && args[0] != "export")) {
		return e.helpEach(ctx, zonesCmd, "import", "export")
	}
	if len(args) == 0 {
		return usagef("missing import or export")
	}
	switch args[0] {
	case "import":
		return zonesImport(ctx, e, args[1:])
	case "export":
		return zonesExport(ctx, e, args[1:])
	}
	return usagef("unknown zones subcommand %q (import, export)", args[0])
}

func zonesImport(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	csvFile := fs.String("csv", "", "IP plan as CSV: header row, columns network,region[,zone][,lat,lon] in any order")
	czfFile := fs.String("czf", "", "Traffic Router Coverage Zone File (JSON)")
	topo := fs.String("f", "", "topology file to put the zones in (default: the center's current topology, over the admin API)")
	outFile := fs.String("out", "", "write the result to FILE (default: standard output)")
	replace := fs.Bool("replace", false, "the imported zones replace all the topology's zones (the default)")
	merge := fs.Bool("merge", false, "the imported zones replace the topology's zones of the same names; the others stay (a network already in another zone is an overlap)")
	move := fs.Bool("move", false, "as --merge, but the imported networks leave the topology's other zones first (renumbering, splitting a zone); a zone left with no network goes")
	zonesOnly := fs.Bool("zones-only", false, "write only the zones: section, not the whole topology")
	regionMap := fs.String("region-map", "", "CZF: FILE saying each zone's region (YAML zone: region, or CSV zone,region)")
	fromName := fs.Bool("region-from-name", false, "CZF: a zone's region is its name up to the first '-' or '_'")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if (*csvFile == "") == (*czfFile == "") {
		return usagef("give one of --csv FILE or --czf FILE")
	}
	if n := btoi(*replace) + btoi(*merge) + btoi(*move); n > 1 {
		return usagef("--replace, --merge and --move exclude each other")
	}
	if *csvFile != "" && (*regionMap != "" || *fromName) {
		return usagef("--region-map and --region-from-name are for --czf (a CSV names each network's region)")
	}
	if *regionMap != "" && *fromName {
		return usagef("--region-map and --region-from-name exclude each other")
	}
	base, baseName, err := zonesTopology(ctx, e, *topo)
	if err != nil {
		return err
	}
	o := zoneimport.Options{Regions: base.Regions, RegionFromName: *fromName}
	if *regionMap != "" {
		data, err := readLimited(*regionMap)
		if err != nil {
			return fmt.Errorf("--region-map: %w", err)
		}
		if o.RegionMap, err = zoneimport.ReadRegionMap(data, *regionMap); err != nil {
			return err
		}
		o.RegionMapName = *regionMap
	}
	var plan *zoneimport.Plan
	if *csvFile != "" {
		data, err := readLimited(*csvFile)
		if err != nil {
			return fmt.Errorf("--csv: %w", err)
		}
		plan, err = zoneimport.ReadCSV(data, *csvFile, o)
		if err != nil {
			return err
		}
	} else {
		data, err := readLimited(*czfFile)
		if err != nil {
			return fmt.Errorf("--czf: %w", err)
		}
		plan, err = zoneimport.ReadCZF(data, *czfFile, o)
		if err != nil {
			return err
		}
	}
	source := *csvFile + *czfFile
	mode := zoneimport.Replace
	switch {
	case *merge:
		mode = zoneimport.Merge
	case *move:
		mode = zoneimport.Move
	}
	result, err := plan.Into(base, mode, source)
	if err != nil {
		return err
	}
	var doc []byte
	if *zonesOnly {
		doc, err = yamlDoc(struct {
			Zones []topology.Zone `yaml:"zones"`
		}{result.Zones})
	} else {
		doc, err = result.YAML()
	}
	if err != nil {
		return err
	}
	if err := writeOutput(e, *outFile, doc); err != nil {
		return err
	}
	fmt.Fprintf(e.errOut, "%s: %d zones, %d networks; against %s: %s\n", source, len(plan.Zones), plan.Networks(), baseName, topology.Diff(base, result).Summary())
	switch {
	case *zonesOnly:
		fmt.Fprintln(e.errOut, "put these zones in the topology and apply it with `schedctl apply -f FILE`: it shows the diff and asks before applying")
	case *outFile != "":
		fmt.Fprintf(e.errOut, "apply it with `schedctl apply -f %s`: it shows the diff against the running topology and asks before applying\n", *outFile)
	default:
		fmt.Fprintln(e.errOut, "apply it with `schedctl apply -f FILE` (or -f - from a pipe, with --yes after a --dry-run): it shows the diff first")
	}
	return nil
}

func zonesExport(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	asCSV := fs.Bool("csv", false, "write a CSV: network,region,zone,lat,lon")
	asCZF := fs.Bool("czf", false, "write a Traffic Router Coverage Zone File (JSON)")
	topo := fs.String("f", "", "topology file (default: the center's current topology, over the admin API)")
	outFile := fs.String("out", "", "write to FILE (default: standard output)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if *asCSV == *asCZF {
		return usagef("give one of --csv or --czf")
	}
	t, _, err := zonesTopology(ctx, e, *topo)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if *asCSV {
		err = zoneimport.WriteCSV(&b, t)
	} else {
		err = zoneimport.WriteCZF(&b, t)
	}
	if err != nil {
		return err
	}
	return writeOutput(e, *outFile, b.Bytes())
}

// zonesTopology reads the topology -f names, or the center's current one
// (with its revision, so an apply of the result is refused if another
// apply came in between). The document is checked as the center would.
func zonesTopology(ctx context.Context, e *env, file string) (*topology.Topology, string, error) {
	var doc []byte
	name := file
	if file != "" {
		var err error
		if doc, err = readDocument(e, file); err != nil {
			return nil, "", err
		}
	} else {
		resp, err := e.admin.GetTopology(ctx, &pb.GetTopologyRequest{})
		if err != nil {
			return nil, "", err
		}
		doc = resp.GetDocument()
		name = fmt.Sprintf("the center's revision %d", resp.GetRevision())
	}
	t, err := topology.Decode(doc)
	if err == nil {
		err = topology.LoosestLimits.Validate(t)
	}
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	return t, name, nil
}

// readLimited reads a file of at most zoneimport.MaxFileBytes.
func readLimited(name string) ([]byte, error) { return readAtMost(name, zoneimport.MaxFileBytes) }

// readAtMost reads the file name, refusing one of more than max bytes
// before reading it all.
func readAtMost(name string, max int) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > max {
		return nil, fmt.Errorf("%s is larger than %d MiB", name, max>>20)
	}
	return data, nil
}

// writeOutput writes data to -o FILE, or standard output.
func writeOutput(e *env, file string, data []byte) error {
	if file == "" {
		_, err := e.out.Write(data)
		return err
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	return nil
}

// yamlDoc renders v with 2-space indentation, as topology documents are.
func yamlDoc(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
