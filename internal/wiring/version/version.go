// Package version reports the build's version: the one `make build`
// stamps, else the module and VCS information the Go toolchain embeds,
// else "devel".
package version

import "runtime/debug"

// stamped is set at link time by `make build`:
//
//	-ldflags "-X github.com/anysched/anysched/internal/wiring/version.stamped=$(git describe --tags --always --dirty)"
//
// It must be a package variable for -X to set it; nothing assigns it at
// run time. Stamping survives builds without VCS information (a tarball,
// -buildvcs=false), where the toolchain embeds no revision.
var stamped string

// String returns the build's version.
func String() string {
	bi, _ := debug.ReadBuildInfo() // nil when the binary carries none
	return resolve(stamped, bi)
}

// resolve picks the version: the stamped one, then the module version (go
// install module@version), then the VCS revision (12 hex digits, -dirty
// for uncommitted changes), then "devel".
func resolve(stamped string, bi *debug.BuildInfo) string {
	if stamped != "" {
		return stamped
	}
	if bi == nil {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
