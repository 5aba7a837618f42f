package etcdauth

import (
	"strings"
	"testing"
)

func TestParseIdentity(t *testing.T) {
	for _, tt := range []struct {
		spec string
		want Identity
		err  string
	}{
		{spec: "anysched-center", want: Identity{Name: "anysched-center", Kind: Center}},
		{spec: "anysched-regional.hefei.hefei-1", want: Identity{Name: "anysched-regional.hefei.hefei-1", Kind: Regional, Region: "hefei", Instance: "hefei-1"}},
		{spec: "anysched-regional.hefei.host.example.net-regional-hefei+checker", want: Identity{Name: "anysched-regional.hefei.host.example.net-regional-hefei", Kind: Regional, Region: "hefei", Instance: "host.example.net-regional-hefei", CheckerID: "host.example.net-regional-hefei"}},
		{spec: "anysched-checker.hefei.chk-1", want: Identity{Name: "anysched-checker.hefei.chk-1", Kind: Checker, Region: "hefei", CheckerID: "chk-1"}},
		{spec: "anysched-checker.hefei.chk.example.net", want: Identity{Name: "anysched-checker.hefei.chk.example.net", Kind: Checker, Region: "hefei", CheckerID: "chk.example.net"}},
		{spec: "anysched-checker.center.central-1", want: Identity{Name: "anysched-checker.center.central-1", Kind: Checker, Region: "center", CheckerID: "central-1"}},
		{spec: "anysched-regional.hefei.hefei-1+checker", want: Identity{Name: "anysched-regional.hefei.hefei-1", Kind: Regional, Region: "hefei", Instance: "hefei-1", CheckerID: "hefei-1"}},
		// The form before checkers were bound to a region is refused,
		// naming the new one.
		{spec: "anysched-checker.chk-1", err: "old form, refused: a checker's identity names the region it checks, anysched-checker.<region>.<checker-id>"},
		{spec: "anysched-checker..chk-1", err: "empty region"},
		{spec: "anysched-checker.hefei.", err: "empty checker id"},
		{spec: "anysched-regional.center.c-1+checker", err: "province-wide checkers'"},
		{spec: "anysched-regional.hefei", err: "want anysched-regional.<region>.<instance-id>"},
		{spec: "anysched-regional..x", err: "empty region"},
		{spec: "anysched-regional.hefei.", err: "empty instance id"},
		{spec: "anysched-regional.hefei.a/b", err: "only letters"},
		{spec: "anysched-checker.", err: "old form"},
		{spec: "anysched-checker.x+checker", err: "only a regional"},
		{spec: "anysched-center+checker", err: "only a regional"},
		{spec: "root", err: "not anysched-center"},
	} {
		got, err := ParseIdentity(tt.spec)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: err %v, want %q", tt.spec, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q: %+v, %v; want %+v", tt.spec, got, err, tt.want)
		}
	}
	if _, err := ParseIdentities([]string{"anysched-checker.r.a", "anysched-checker.r.a"}); err == nil {
		t.Error("a duplicate identity passed")
	}
}

// FuzzParseIdentity: an identity that parses never reaches beyond its own
// keys: its ids are one key segment each.
func FuzzParseIdentity(f *testing.F) {
	for _, s := range []string{"anysched-center", "anysched-regional.hefei.hefei-1+checker", "anysched-checker.c", "anysched-checker.r.c", "anysched-regional.a./", "anysched-checker.../x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		id, err := ParseIdentity(spec)
		if err != nil {
			return
		}
		for _, part := range []string{id.Region, id.Instance, id.CheckerID} {
			if strings.ContainsAny(part, "/\x00") {
				t.Fatalf("%q: key segment %q", spec, part)
			}
		}
		for _, p := range Permissions("/p/", id) {
			if !strings.HasPrefix(p.Key, "/p/") || (p.RangeEnd != "" && p.RangeEnd > "/p0") {
				t.Fatalf("%q: permission %s beyond the prefix", spec, p)
			}
		}
	})
}
