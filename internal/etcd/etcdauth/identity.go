// Package etcdauth confines each anysched daemon to its own keys in the
// province's etcd: from the daemons' identities (etcd user names, which
// are the CNs of their client certificates) it provisions etcd users and
// roles with key-prefix permissions under the province prefix, and turns
// authentication on. Provisioning is idempotent: it compares what etcd has
// with what it wants and changes only the difference, revoking what is no
// longer wanted.
package etcdauth

import (
	"fmt"
	"strings"

	"github.com/anysched/anysched/internal/etcd/keyspace"
)

// Identity names. A daemon's etcd client certificate carries one of them as
// its subject CN; etcd (with --client-cert-auth) takes the CN as the user.
const (
	// CenterIdentity is the central scheduler: it writes topology and
	// operator state.
	CenterIdentity = "anysched-center"
	// RegionalPrefix starts a regional scheduler's identity:
	// anysched-regional.<region>.<instance-id>.
	RegionalPrefix = "anysched-regional."
	// CheckerPrefix starts a health checker's identity:
	// anysched-checker.<region>.<checker-id>, where the region is the one
	// it checks, or keyspace.ProvinceRegion (center) for a province-wide
	// checker. The region is bound into what the identity may write
	// (health/<region>/<checker-id>/), which is what lets a reader trust
	// it; the older anysched-checker.<checker-id> is refused.
	CheckerPrefix = "anysched-checker."
	// RootUser is etcd's superuser; it must exist (with the root role)
	// before etcd turns authentication on. Nothing of anysched uses it:
	// only an operator's bootstrap certificate with CN root does.
	RootUser = "root"
	// EmbeddedCheckerSuffix, after a regional's identity in a list of
	// identities to provision, grants it a checker's keys too: a regional
	// scheduler with health.embedded runs a checker whose id is its
	// instance id.
	EmbeddedCheckerSuffix = "+checker"
)

// Kind is what an identity is.
type Kind int

// The kinds of identity.
const (
	Center Kind = iota + 1
	Regional
	Checker
)

func (k Kind) String() string {
	switch k {
	case Center:
		return "center"
	case Regional:
		return "regional"
	case Checker:
		return "checker"
	}
	return "unknown"
}

// Identity is one daemon's etcd user.
type Identity struct {
	Name     string // the etcd user (and role) name: the certificate's CN
	Kind     Kind
	Region   string // a regional's region, or the region a checker checks
	Instance string // a regional's instance id
	// CheckerID is a checker's id, or a regional's embedded checker's (its
	// instance id); empty for a regional without one.
	CheckerID string
}

// ParseIdentity reads an identity as written in a list to provision:
//
//	anysched-center
//	anysched-regional.<region>.<instance-id>[+checker]
//	anysched-checker.<region>.<checker-id>
//
// The region is the part up to the first '.', so a region whose name has a
// '.' cannot be told apart from its instance id: such a region is refused.
// A checker's region center (keyspace.ProvinceRegion) makes it a
// province-wide checker; no regional may take it.
func ParseIdentity(spec string) (Identity, error) {
	name, checker := strings.CutSuffix(spec, EmbeddedCheckerSuffix)
	switch {
	case name == CenterIdentity:
		if checker {
			return Identity{}, fmt.Errorf("%q: only a regional scheduler embeds a checker", spec)
		}
		return Identity{Name: name, Kind: Center}, nil
	case strings.HasPrefix(name, RegionalPrefix):
		region, instance, ok := strings.Cut(strings.TrimPrefix(name, RegionalPrefix), ".")
		if !ok {
			return Identity{}, fmt.Errorf("%q: want %s<region>.<instance-id>", spec, RegionalPrefix)
		}
		if err := keyPart("region", region); err != nil {
			return Identity{}, fmt.Errorf("%q: %w", spec, err)
		}
		if region == keyspace.ProvinceRegion {
			return Identity{}, fmt.Errorf("%q: region %q is the province-wide checkers' (%s%s.<checker-id>); no city may take it", spec, region, CheckerPrefix, region)
		}
		if err := keyPart("instance id", instance); err != nil {
			return Identity{}, fmt.Errorf("%q: %w", spec, err)
		}
		id := Identity{Name: name, Kind: Regional, Region: region, Instance: instance}
		if checker {
			id.CheckerID = instance
		}
		return id, nil
	case strings.HasPrefix(name, CheckerPrefix):
		if checker {
			return Identity{}, fmt.Errorf("%q: only a regional scheduler embeds a checker", spec)
		}
		region, cid, ok := strings.Cut(strings.TrimPrefix(name, CheckerPrefix), ".")
		if !ok {
			// The form before checkers were bound to a region: its role
			// wrote verdicts that counted for every region.
			return Identity{}, fmt.Errorf("%q: %s<checker-id> is the old form, refused: a checker's identity names the region it checks, %s<region>.<checker-id> (%s%s.<checker-id> for a province-wide checker); issue it a certificate of that CN (docs/operations.md, \"Naming a health checker\")", spec, CheckerPrefix, CheckerPrefix, CheckerPrefix, keyspace.ProvinceRegion)
		}
		if err := keyPart("region", region); err != nil {
			return Identity{}, fmt.Errorf("%q: %w", spec, err)
		}
		if err := keyPart("checker id", cid); err != nil {
			return Identity{}, fmt.Errorf("%q: %w", spec, err)
		}
		return Identity{Name: name, Kind: Checker, Region: region, CheckerID: cid}, nil
	}
	return Identity{}, fmt.Errorf("%q: not %s, %s<region>.<instance-id>[%s] or %s<region>.<checker-id>", spec, CenterIdentity, RegionalPrefix, EmbeddedCheckerSuffix, CheckerPrefix)
}

// keyPart checks a name that becomes one segment of an etcd key: a '/'
// would reach another daemon's keys, and the rest keeps the names printable.
func keyPart(what, s string) error {
	if s == "" {
		return fmt.Errorf("empty %s", what)
	}
	if len(s) > 128 {
		return fmt.Errorf("%s longer than 128 characters", what)
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return fmt.Errorf("%s %q: only letters, digits, '-', '_' and '.'", what, s)
		}
	}
	return nil
}

// ParseIdentities reads a list, refusing duplicates (one user, one role).
func ParseIdentities(specs []string) ([]Identity, error) {
	out := make([]Identity, 0, len(specs))
	seen := map[string]bool{}
	for _, s := range specs {
		id, err := ParseIdentity(s)
		if err != nil {
			return nil, err
		}
		if seen[id.Name] {
			return nil, fmt.Errorf("%q listed twice", id.Name)
		}
		seen[id.Name] = true
		out = append(out, id)
	}
	return out, nil
}
