package opstate

// The province's etcd key layout. Every key the system reads or writes sits
// under the configured prefix (etcd.prefix, default "/anysched/") and is
// listed here, with who writes it, so that an operator granting etcd roles
// or reading `etcdctl get --prefix` has one place to look. Each writer's
// keys share a prefix of their own, so that etcd's key-prefix permissions
// (internal/etcdauth) confine it: the center writes everything, a regional
// scheduler only instances/<instance-id> and
// alloc/claims/<region>/<instance-id>, a checker only health/<checker-id>/
// and checkers/<checker-id>; everyone reads the whole prefix.
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
	// PrefixHealth holds the checkers' verdicts: health/<checker-id>/<server>,
	// written by each health checker under its lease (checker first, so
	// that one prefix permission holds a checker to its own verdicts).
	PrefixHealth = "health/"
	// PrefixCheckers holds each live checker's description
	// (checkers/<checker-id>), written by the checker under its lease.
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
	// PrefixAllocState holds each QoE planner's last published plan:
	// alloc/state/<region>/<instance-id>/<part, 4 digits>, gzipped JSON
	// (store.AllocState), without a lease, so that it outlives the
	// instance: whoever plans the region next (the center when the city
	// falls, the city when it returns) starts from it.
	PrefixAllocState = "alloc/state/"
	// PrefixAudit holds the admin audit trail: audit/<unix nanos, 20
	// digits>-<random>, one record per audited admin call (who, from where,
	// what, outcome). Written by the central scheduler's admin API, trimmed
	// by it to audit.keep entries and audit.max_age.
	PrefixAudit = "audit/"
)

// Keys lists every key and prefix above, for tests and tooling.
var Keys = []string{KeyTopologyCurrent, PrefixTopologyBlobs, PrefixTopologyHistory, PrefixInstances, PrefixHealth, PrefixCheckers, PrefixDrain, PrefixDrill, KeyBalance, PrefixAllocClaims, PrefixAllocState, PrefixAudit}
