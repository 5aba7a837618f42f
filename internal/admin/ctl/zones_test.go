package ctl

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// zonesProvince writes a small province to dir and returns it.
func zonesProvince(t *testing.T, dir string) (*topology.Topology, string) {
	t.Helper()
	top := topogen.Province([]topogen.City{{Name: "hefei", Lat: 31.82, Lon: 117.23}, {Name: "wuhu", Lat: 31.33, Lon: 118.38}}, topogen.SampleOptions)
	doc, err := top.YAML()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "topology.yaml")
	if err := os.WriteFile(file, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	return top, file
}

func runZones(t *testing.T, f *fakeAdmin, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, testEnv(f, &out, &errOut))
	return out.String(), errOut.String(), err
}

// TestZonesImportOffline: with -f, import and export use no admin API (no
// call is sent), the result is a whole topology that validates, with the
// imported zones, and the command says how to apply it.
func TestZonesImportOffline(t *testing.T) {
	dir := t.TempDir()
	_, topo := zonesProvince(t, dir)
	plan := filepath.Join(dir, "plan.csv")
	os.WriteFile(plan, []byte("network,region\n100.64.0.0/24,hefei\n100.64.1.0/24,wuhu\n"), 0o644)
	out := filepath.Join(dir, "new.yaml")
	f := &fakeAdmin{}
	_, errOut, err := runZones(t, f, "zones", "import", "--csv", plan, "-f", topo, "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.sent()) != 0 {
		t.Errorf("calls sent: %s", callsText(f.sent()))
	}
	if !strings.Contains(errOut, "schedctl apply -f "+out) || !strings.Contains(errOut, "2 zones, 2 networks") {
		t.Errorf("stderr: %s", errOut)
	}
	doc, _ := os.ReadFile(out)
	got, err := topology.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []topology.Zone{{Name: "hefei-1", Region: "hefei", Networks: []string{"100.64.0.0/24"}}, {Name: "wuhu-1", Region: "wuhu", Networks: []string{"100.64.1.0/24"}}}
	if !reflect.DeepEqual(got.Zones, want) {
		t.Errorf("zones %+v", got.Zones)
	}

	// A mistake: every problem with its place, nothing written.
	os.WriteFile(plan, []byte("network,region\n100.64.0.1/24,hefei\n100.64.1.0/24,wuhan\n"), 0o644)
	os.Remove(out)
	_, _, err = runZones(t, f, "zones", "import", "--csv", plan, "-f", topo, "--out", out)
	wantErr := "schedctl zones: " + plan + ": 2 problems:\n" +
		"  line 2, column 1 (network): host bits set in 100.64.0.1/24 (did you mean 100.64.0.0/24?)\n" +
		"  line 3, column 15 (region): unknown region \"wuhan\"; did you mean \"wuhu\"?"
	checkErr(t, err, wantErr, false)
	if _, statErr := os.Stat(out); statErr == nil {
		t.Error("output written despite the problems")
	}
}

// TestZonesExportFromCenter: without -f, export reads the center's
// topology; re-importing the export into it changes nothing.
func TestZonesExportFromCenter(t *testing.T) {
	dir := t.TempDir()
	top, topo := zonesProvince(t, dir)
	doc, _ := os.ReadFile(topo)
	f := &fakeAdmin{handlers: map[string]handler{"GetTopology": reply(&pb.GetTopologyResponse{Revision: 7, Document: doc})}}
	for _, format := range []string{"--csv", "--czf"} {
		exported, _, err := runZones(t, f, "zones", "export", format)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, "zones"+format[1:])
		os.WriteFile(file, []byte(exported), 0o644)
		out, errOut, err := runZones(t, f, "zones", "import", format, file, "-f", topo)
		if err != nil {
			t.Fatal(err)
		}
		got, err := topology.Parse([]byte(out))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Zones, top.Zones) || !strings.Contains(errOut, "no change") {
			t.Errorf("%s: round trip changed the zones (%s)", format, errOut)
		}
	}
	if n := len(f.sent()); n != 2 {
		t.Errorf("%d calls, want the 2 exports' GetTopology", n)
	}
}

func TestZonesUsage(t *testing.T) {
	runCases(t, []cmdCase{
		{name: "no format", args: []string{"zones", "import", "-f", "x"}, wantErr: "schedctl zones: give one of --csv FILE or --czf FILE", usage: true},
		{name: "both modes", args: []string{"zones", "import", "--csv", "a", "--merge", "--replace"}, wantErr: "schedctl zones: --replace, --merge and --move exclude each other", usage: true},
		{name: "merge and move", args: []string{"zones", "import", "--csv", "a", "--merge", "--move"}, wantErr: "schedctl zones: --replace, --merge and --move exclude each other", usage: true},
		{name: "region map with csv", args: []string{"zones", "import", "--csv", "a", "--region-from-name"}, wantErr: "schedctl zones: --region-map and --region-from-name are for --czf (a CSV names each network's region)", usage: true},
		{name: "export format", args: []string{"zones", "export"}, wantErr: "schedctl zones: give one of --csv or --czf", usage: true},
		{name: "subcommand", args: []string{"zones", "list"}, wantErr: "schedctl zones: unknown zones subcommand \"list\" (import, export)", usage: true},
	})
}
