// Package keyspace is the province's etcd key layout. Every key the system
// reads or writes sits under the configured prefix (etcd.prefix, default
// "/anysched/") and is listed here, with who writes it, so that an operator
// granting etcd roles or reading `etcdctl get --prefix` has one place to
// look, and so that the packages owning the concepts (store, health, opstate,
// audit) and the permissions confining their writers (etcdauth) build the
// same keys. Each writer's keys share a prefix of their own, so that etcd's
// key-prefix permissions confine it: the center writes everything, a
// regional scheduler only instances/<instance-id>,
// alloc/claims/<region>/<instance-id> and alloc/state/<region>/<instance-id>/,
// a checker only health/<region>/<checker-id>/ and
// checkers/<region>/<checker-id>; everyone reads the whole prefix.
//
// Keys here are relative to the prefix; callers put the prefix in front.
package keyspace

import (
	"fmt"
	"strings"
)

const (
	// KeyTopologyCurrent points at the topology in force (revision and
	// digest). Written by the central scheduler's admin API (schedctl
	// apply), in one transaction with its blobs.
	KeyTopologyCurrent = "topology/current"
	// PrefixTopologyBlobs holds topology documents by digest, gzipped in
	// chunks: topology/blobs/<digest>/<n>. Written with KeyTopologyCurrent.
	PrefixTopologyBlobs = "topology/blobs/"
	// PrefixTopologyHistory holds one entry per apply or rollback,
	// topology/history/<sequence, zero-padded>: digest, time, who, note,
	// diff summary, counts; the key's mod revision is the topology
	// revision. Written with KeyTopologyCurrent, in the same transaction;
	// the last apply.history_keep revisions' blobs are kept, entries up to
	// 1000 applies.
	PrefixTopologyHistory = "topology/history/"
	// PrefixInstances holds each scheduler's registration
	// (instances/<instance-id>), written by the scheduler itself under its
	// lease: role, region, snapshot revision, announce state, QoE summary.
	PrefixInstances = "instances/"
	// PrefixHealth holds the checkers' verdicts:
	// health/<region>/<checker-id>/<server>, written by each health
	// checker under its lease. Region and checker come first, so that one
	// prefix permission holds a checker to its own verdicts, and so that
	// a reader may trust the region from the key: only an etcd user bound
	// to that region can write under it (etcdauth). The region
	// ProvinceRegion is a province-wide checker's.
	PrefixHealth = "health/"
	// PrefixCheckers holds each live checker's description
	// (checkers/<region>/<checker-id>), written by the checker under the
	// lease of its verdicts.
	PrefixCheckers = "checkers/"
	// PrefixDrain holds operator drains: drain/<kind>/<name>. Written by the
	// admin API (schedctl drain, undrain); kept until undrained.
	PrefixDrain = "drain/"
	// PrefixDrill holds failover drills in force: drill/<target> where the
	// target is a region or "center". Written by the admin API (schedctl
	// drill) under a lease that outlives the drill by a few seconds.
	PrefixDrill = "drill/"
	// KeyBalance is the in-node balance policy document (YAML), written by
	// the admin API (schedctl balance set, reset) after validating it;
	// absent means defaults.
	KeyBalance = "balance/config"
	// PrefixAllocClaims holds the QoE allocation's capacity claims:
	// alloc/claims/<region>/<instance-id>, written by each regional
	// scheduler of the region under its lease.
	PrefixAllocClaims = "alloc/claims/"
	// PrefixAllocState holds each QoE planner's last published plan
	// (store.AllocState) under alloc/state/<region>/<instance-id>/: a
	// generation's base in parts (b/<generation>/<part>), the deltas
	// published since (d/<generation>/<sequence>) and the head naming
	// them (h), in a binary format (docs/design.md, "Plan state in
	// etcd"); before it, gzipped JSON in parts (<part, 4 digits>), which
	// is still read. Without a lease, so that it outlives the instance:
	// whoever plans the region next (the center when the city falls, the
	// city when it returns) starts from it.
	PrefixAllocState = "alloc/state/"
	// PrefixAudit holds the admin audit trail: audit/<unix nanos, 20
	// digits>-<random>, one record per audited admin call (who, from where,
	// what, outcome). Written by the central scheduler's admin API, trimmed
	// by it to audit.keep entries and audit.max_age.
	PrefixAudit = "audit/"
	// PrefixGuardRevoked holds the center's write guard's revocations:
	// guard/revoked/<etcd identity>, JSON (why, when), for each identity
	// whose etcd writes it revoked for writing past its bound. Written by
	// the central scheduler; deleting one grants the writes back.
	PrefixGuardRevoked = "guard/revoked/"
)

// All lists every key and prefix above, for tests and tooling.
func All() []string {
	return []string{KeyTopologyCurrent, PrefixTopologyBlobs, PrefixTopologyHistory, PrefixInstances, PrefixHealth, PrefixCheckers, PrefixDrain, PrefixDrill, KeyBalance, PrefixAllocClaims, PrefixAllocState, PrefixAudit, PrefixGuardRevoked}
}

// Concepts of the layout, as Concept names them: the label an etcd write
// meter counts a key's bytes under (etcdclient.WriteMeter).
const (
	ConceptTopology    = "topology"     // topology/current, blobs/, history/: one apply
	ConceptInstances   = "instances"    // PrefixInstances
	ConceptHealth      = "health"       // PrefixHealth: verdicts
	ConceptCheckers    = "checkers"     // PrefixCheckers
	ConceptDrain       = "drain"        // PrefixDrain
	ConceptDrill       = "drill"        // PrefixDrill
	ConceptBalance     = "balance"      // KeyBalance
	ConceptAllocClaims = "alloc_claims" // PrefixAllocClaims
	ConceptAllocState  = "alloc_state"  // PrefixAllocState
	ConceptAudit       = "audit"        // PrefixAudit
	ConceptGuard       = "guard"        // PrefixGuardRevoked
	// ConceptOther is a key under no prefix of the layout (or outside the
	// province's prefix).
	ConceptOther = "other"
)

// Concept names the concept of key, relative to the prefix: the concept
// of the layout's key or prefix it falls under, ConceptOther for none.
// Keys of the layout do not overlap (no key is a prefix of another's), so
// at most one matches.
func Concept(key string) string {
	has := func(p string) bool { return strings.HasPrefix(key, p) }
	switch {
	case has(KeyTopologyCurrent), has(PrefixTopologyBlobs), has(PrefixTopologyHistory):
		return ConceptTopology
	case has(PrefixInstances):
		return ConceptInstances
	case has(PrefixHealth):
		return ConceptHealth
	case has(PrefixCheckers):
		return ConceptCheckers
	case has(PrefixDrain):
		return ConceptDrain
	case has(PrefixDrill):
		return ConceptDrill
	case has(KeyBalance):
		return ConceptBalance
	case has(PrefixAllocClaims):
		return ConceptAllocClaims
	case has(PrefixAllocState):
		return ConceptAllocState
	case has(PrefixAudit):
		return ConceptAudit
	case has(PrefixGuardRevoked):
		return ConceptGuard
	}
	return ConceptOther
}

// ConceptNames lists every name Concept returns, ConceptOther last.
func ConceptNames() []string {
	return []string{ConceptTopology, ConceptInstances, ConceptHealth, ConceptCheckers, ConceptDrain, ConceptDrill,
		ConceptBalance, ConceptAllocClaims, ConceptAllocState, ConceptAudit, ConceptGuard, ConceptOther}
}

// TopologyBlobs is the prefix of one topology document's chunks.
func TopologyBlobs(digest string) string { return PrefixTopologyBlobs + digest + "/" }

// TopologyHistory is the history entry of an apply; zero-padded so that
// keys sort in apply order.
func TopologyHistory(seq int64) string { return fmt.Sprintf("%s%012d", PrefixTopologyHistory, seq) }

// Instance is a scheduler's registration: instances/<region>/<id>, the
// region ProvinceRegion for a central scheduler. The key, which etcd's
// roles let only that identity write, says who registered; the record's
// own role and region fields are not believed.
func Instance(region, id string) string { return PrefixInstances + region + "/" + id }

// LegacyInstance is the registration key of the release before,
// instances/<id>, which named neither role nor region. A city of that
// release may still write it while the province is upgraded.
func LegacyInstance(id string) string { return PrefixInstances + id }

// ParseInstance splits a key under PrefixInstances (relative to the
// prefix) into its region and id; legacy is true for the layout before
// regions (instances/<id>), and ok false for any other shape.
func ParseInstance(key string) (region, id string, legacy, ok bool) {
	rest, ok := strings.CutPrefix(key, PrefixInstances)
	if !ok || rest == "" {
		return "", "", false, false
	}
	region, id, found := strings.Cut(rest, "/")
	switch {
	case !found:
		return "", rest, true, true
	case region == "" || id == "" || strings.Contains(id, "/"):
		return "", "", false, false
	}
	return region, id, false, true
}

// ProvinceRegion, as the region of a checker's keys, is a province-wide
// checker's: its verdicts count for the servers of every region. It is
// topology.CenterName, the region name no city may take, so no city's
// checker can be mistaken for one.
const ProvinceRegion = "center"

// Verdicts is the prefix of one checker's verdicts, the prefix its etcd
// user may write; region is the region it checks (ProvinceRegion for a
// province-wide checker).
func Verdicts(region, checker string) string { return PrefixHealth + region + "/" + checker + "/" }

// Verdict is one checker's verdict on one server.
func Verdict(region, checker, server string) string { return Verdicts(region, checker) + server }

// Checker is a live checker's description.
func Checker(region, id string) string { return PrefixCheckers + region + "/" + id }

// ParseVerdict splits a key under PrefixHealth (relative to the prefix)
// into its region, checker and server; ok is false for any other shape,
// among them the layout before regions, health/<checker-id>/<server>.
func ParseVerdict(key string) (region, checker, server string, ok bool) {
	rest, ok := strings.CutPrefix(key, PrefixHealth)
	if !ok {
		return "", "", "", false
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" || strings.Contains(parts[2], "/") {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

// ParseChecker splits a key under PrefixCheckers (relative to the
// prefix) into its region and checker; ok is false for any other shape,
// among them the layout before regions, checkers/<checker-id>.
func ParseChecker(key string) (region, checker string, ok bool) {
	rest, ok := strings.CutPrefix(key, PrefixCheckers)
	if !ok {
		return "", "", false
	}
	region, checker, ok = strings.Cut(rest, "/")
	if !ok || region == "" || checker == "" || strings.Contains(checker, "/") {
		return "", "", false
	}
	return region, checker, true
}

// Drain is an operator drain of a server, node or region.
func Drain(kind, name string) string { return PrefixDrain + kind + "/" + name }

// Drill is the failover drill of a region or "center".
func Drill(target string) string { return PrefixDrill + target }

// AllocClaims is the prefix of a region's capacity claims.
func AllocClaims(region string) string { return PrefixAllocClaims + region + "/" }

// AllocClaim is one instance's capacity claims in its region.
func AllocClaim(region, instance string) string { return AllocClaims(region) + instance }

// AllocStates is the prefix of a region's published plans.
func AllocStates(region string) string { return PrefixAllocState + region + "/" }

// AllocState is the prefix of one instance's plan of a region, in parts.
func AllocState(region, instance string) string { return AllocStates(region) + instance + "/" }

// AllocStatePart is one part of an instance's plan in the gzipped JSON
// layout that the binary one replaced: read, no longer written.
func AllocStatePart(region, instance string, part int) string {
	return fmt.Sprintf("%s%04d", AllocState(region, instance), part)
}

// AllocStateHead is the head of an instance's plan: which generation and
// how many of its deltas make the plan.
func AllocStateHead(region, instance string) string { return AllocState(region, instance) + "h" }

// AllocStateBases is the prefix of one generation's base parts.
func AllocStateBases(region, instance string, gen uint64) string {
	return fmt.Sprintf("%sb/%016x/", AllocState(region, instance), gen)
}

// AllocStateBase is part n of a generation's base.
func AllocStateBase(region, instance string, gen uint64, part int) string {
	return fmt.Sprintf("%s%04d", AllocStateBases(region, instance, gen), part)
}

// AllocStateDeltas is the prefix of one generation's deltas.
func AllocStateDeltas(region, instance string, gen uint64) string {
	return fmt.Sprintf("%sd/%016x/", AllocState(region, instance), gen)
}

// AllocStateDelta is delta seq (from 1) of a generation.
func AllocStateDelta(region, instance string, gen uint64, seq int) string {
	return fmt.Sprintf("%s%06d", AllocStateDeltas(region, instance, gen), seq)
}
