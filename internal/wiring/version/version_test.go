package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// The stamp wins over everything the toolchain embeds; then the module
// version, then the VCS revision, then "devel".
func TestResolvePrecedence(t *testing.T) {
	vcs := func(mainVersion, rev, modified string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/anysched/anysched", Version: mainVersion}}
		if rev != "" {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: "vcs.revision", Value: rev})
		}
		if modified != "" {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: "vcs.modified", Value: modified})
		}
		return bi
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name    string
		stamped string
		bi      *debug.BuildInfo
		want    string
	}{
		{"stamp over everything", "v1.4.0-3-g0123456-dirty", vcs("v1.3.0", rev, "true"), "v1.4.0-3-g0123456-dirty"},
		{"stamp without build info", "v1.4.0", nil, "v1.4.0"},
		{"module version", "", vcs("v1.3.0", rev, "false"), "v1.3.0"},
		{"revision", "", vcs("(devel)", rev, "false"), "0123456789ab"},
		{"dirty revision", "", vcs("(devel)", rev, "true"), "0123456789ab-dirty"},
		{"no VCS (tarball, -buildvcs=false)", "", vcs("(devel)", "", ""), "devel"},
		{"no build info", "", nil, "devel"},
	} {
		if got := resolve(tc.stamped, tc.bi); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The Makefile's stamp reaches a binary built without VCS information:
// schedctl version prints it. The -X path is the Makefile's own.
func TestStampedBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds schedctl")
	}
	mk, err := os.ReadFile("../../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	const x = "-X github.com/anysched/anysched/internal/wiring/version.stamped="
	if !strings.Contains(string(mk), x) {
		t.Fatalf("the Makefile does not stamp with %q", x)
	}
	bin := filepath.Join(t.TempDir(), "schedctl")
	build := exec.Command("go", "build", "-buildvcs=false", "-ldflags", x+"v9.8.7-test", "-o", bin, "github.com/anysched/anysched/schedctl")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || string(out) != "schedctl v9.8.7-test\n" {
		t.Fatalf("schedctl version: %v, %q", err, out)
	}
}
