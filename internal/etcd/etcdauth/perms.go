package etcdauth

import (
	"fmt"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Perm is one key-range permission of a role: Key alone when RangeEnd is
// empty, else [Key, RangeEnd) (a prefix, as etcdctl's --prefix).
type Perm struct {
	Key, RangeEnd string
	Type          clientv3.PermissionType
}

// The permission types, typed as RoleGrantPermission takes them.
const (
	Read      = clientv3.PermissionType(clientv3.PermRead)
	Write     = clientv3.PermissionType(clientv3.PermWrite)
	ReadWrite = clientv3.PermissionType(clientv3.PermReadWrite)
)

func (p Perm) String() string {
	t := map[clientv3.PermissionType]string{Read: "read", Write: "write", ReadWrite: "readwrite"}[p.Type]
	switch {
	case p.RangeEnd == "":
		return fmt.Sprintf("%s %s", t, p.Key)
	case p.RangeEnd == clientv3.GetPrefixRangeEnd(p.Key):
		return fmt.Sprintf("%s %s*", t, p.Key)
	}
	return fmt.Sprintf("%s [%s, %s)", t, p.Key, p.RangeEnd)
}

func prefixPerm(key string, t clientv3.PermissionType) Perm {
	return Perm{Key: key, RangeEnd: clientv3.GetPrefixRangeEnd(key), Type: t}
}

// Permissions is what id may do under the province prefix:
//
//	center    readwrite on the whole prefix
//	regional  read on the whole prefix but other regions' plan states
//	          (alloc/state/<region>/* of its own only); write
//	          instances/<region>/<instance-id> (and, for one release,
//	          instances/<instance-id>), alloc/claims/<region>/<instance-id>
//	          and alloc/state/<region>/<instance-id>/*; with an embedded
//	          checker also what a checker of id <instance-id> writes
//	checker   read on the whole prefix but plan states; write
//	          health/<region>/<checker-id>/* and
//	          checkers/<region>/<checker-id>, the region its identity
//	          names (a regional's embedded checker: its own region)
//
// The region in a checker's keys is thus the one its certificate names:
// mergers trust it from the key path, and count a checker's verdicts only
// for its region's servers (internal/province/health).
// So nobody but the center writes topology/, drain/, drill/,
// balance/config or audit/. Reading the rest is what the schedulers'
// feeds and compare-and-swap transactions need (a transaction needs read
// on every key it compares or gets; a feed watches only what it follows).
// Plan states hold a city's viewers (token subjects, addresses, channels,
// places): only the center, which plans a fallen city, and the region's
// own instances read them.
// Leases, MemberList, Status and AlarmList need no permission, only a
// known user; compaction, defragmentation and disarming need the root
// role (Options.CenterRoot), which no city or checker gets.
func Permissions(prefix string, id Identity) []Perm {
	if id.Kind == Center {
		return []Perm{prefixPerm(prefix, ReadWrite)}
	}
	state := prefix + keyspace.PrefixAllocState
	ps := []Perm{
		{Key: prefix, RangeEnd: state, Type: Read},
		{Key: clientv3.GetPrefixRangeEnd(state), RangeEnd: clientv3.GetPrefixRangeEnd(prefix), Type: Read},
	}
	if id.Kind == Regional {
		ps = append(ps, prefixPerm(prefix+keyspace.AllocStates(id.Region), Read))
	}
	if id.Kind == Regional {
		ps = append(ps,
			Perm{Key: prefix + keyspace.Instance(id.Region, id.Instance), Type: Write},
			// The release before registered here; kept for one release,
			// so that a city not yet upgraded still registers (never as
			// a central scheduler: store.Instances).
			Perm{Key: prefix + keyspace.LegacyInstance(id.Instance), Type: Write},
			Perm{Key: prefix + keyspace.AllocClaim(id.Region, id.Instance), Type: Write},
			prefixPerm(prefix+keyspace.AllocState(id.Region, id.Instance), Write))
	}
	if id.CheckerID != "" {
		ps = append(ps,
			prefixPerm(prefix+keyspace.Verdicts(id.Region, id.CheckerID), Write),
			Perm{Key: prefix + keyspace.Checker(id.Region, id.CheckerID), Type: Write})
	}
	return ps
}
