package etcdauth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Options configure provisioning.
type Options struct {
	// Prefix is the province prefix (etcd.prefix), ending in '/'.
	Prefix string
	// CenterRoot grants the center's user etcd's root role too. etcd lets
	// only the root role compact, defragment and disarm alarms (etcd 3.7:
	// kvServer.Compact and the maintenance server's Defragment and Alarm
	// other than GET ask IsAdminPermitted), which the center's etcd
	// housekeeper does; and with the embedded etcd the center provisions
	// users at every start, which only root may. An external cluster
	// provisioned without it (schedctl etcd-roles
	// --center-maintenance=false) keeps the center confined to the prefix,
	// and its housekeeper only watches: Status and AlarmList need a known
	// user, nothing more.
	CenterRoot bool
	// Prune deletes the anysched users and roles (names starting
	// anysched-) that are not listed: a decommissioned city or checker
	// loses its access. Users of other names are never touched.
	Prune bool
}

// Change is one step of provisioning.
type Change struct {
	What string
	do   func(ctx context.Context, cli *clientv3.Client) error
}

func (c Change) String() string { return c.What }

// state is what etcd has.
type state struct {
	enabled   bool
	users     map[string][]string // user -> roles
	roles     map[string][]Perm   // role -> permissions
	userNames []string            // sorted, for pruning in a stable order
	roleNames []string
}

// Plan compares etcd with what the identities need and lists the changes,
// in the order they must run; it changes nothing. The center's identity
// is always included. An empty plan means etcd is provisioned.
func Plan(ctx context.Context, cli *clientv3.Client, ids []Identity, o Options) ([]Change, error) {
	if !strings.HasPrefix(o.Prefix, "/") || !strings.HasSuffix(o.Prefix, "/") {
		return nil, fmt.Errorf("etcdauth: prefix %q must start and end with '/'", o.Prefix)
	}
	st, err := read(ctx, cli)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(ids, func(id Identity) bool { return id.Kind == Center }) {
		ids = append([]Identity{{Name: CenterIdentity, Kind: Center}}, ids...)
	}
	var cs []Change
	add := func(what string, do func(context.Context, *clientv3.Client) error) {
		cs = append(cs, Change{What: what, do: do})
	}
	// etcd turns auth on only with a root user holding the root role.
	if _, ok := st.users[RootUser]; !ok {
		add("add user root (no password: a certificate with CN root)", addUser(RootUser))
	}
	if !slices.Contains(st.users[RootUser], "root") {
		add("grant role root to user root", grantRole(RootUser, "root"))
	}
	wanted := map[string]bool{}
	for _, id := range ids {
		wanted[id.Name] = true
		perms := Permissions(o.Prefix, id)
		have, roleExists := st.roles[id.Name]
		if !roleExists {
			add("add role "+id.Name, func(ctx context.Context, cli *clientv3.Client) error {
				_, err := cli.RoleAdd(ctx, id.Name)
				return err
			})
		}
		for _, p := range have {
			if !slices.ContainsFunc(perms, func(w Perm) bool { return w.Key == p.Key && w.RangeEnd == p.RangeEnd }) {
				add(fmt.Sprintf("role %s: revoke %s", id.Name, p), func(ctx context.Context, cli *clientv3.Client) error {
					_, err := cli.RoleRevokePermission(ctx, id.Name, p.Key, p.RangeEnd)
					return err
				})
			}
		}
		for _, p := range perms {
			if !slices.Contains(have, p) { // missing, or of another type: granting replaces it
				add(fmt.Sprintf("role %s: grant %s", id.Name, p), func(ctx context.Context, cli *clientv3.Client) error {
					_, err := cli.RoleGrantPermission(ctx, id.Name, p.Key, p.RangeEnd, p.Type)
					return err
				})
			}
		}
		roles := []string{id.Name}
		if id.Kind == Center && o.CenterRoot {
			roles = append(roles, "root")
		}
		hasRoles, userExists := st.users[id.Name]
		if !userExists {
			add(fmt.Sprintf("add user %s (%s; no password: its certificate's CN)", id.Name, id.Kind), addUser(id.Name))
		}
		for _, r := range hasRoles {
			if !slices.Contains(roles, r) {
				add(fmt.Sprintf("revoke role %s from user %s", r, id.Name), func(ctx context.Context, cli *clientv3.Client) error {
					_, err := cli.UserRevokeRole(ctx, id.Name, r)
					return err
				})
			}
		}
		for _, r := range roles {
			if !slices.Contains(hasRoles, r) {
				add(fmt.Sprintf("grant role %s to user %s", r, id.Name), grantRole(id.Name, r))
			}
		}
	}
	if o.Prune {
		for _, u := range st.userNames {
			if ours(u) && !wanted[u] {
				add("delete user "+u+" (not listed)", func(ctx context.Context, cli *clientv3.Client) error {
					_, err := cli.UserDelete(ctx, u)
					return err
				})
			}
		}
		for _, r := range st.roleNames {
			if ours(r) && !wanted[r] {
				add("delete role "+r+" (not listed)", func(ctx context.Context, cli *clientv3.Client) error {
					_, err := cli.RoleDelete(ctx, r)
					return err
				})
			}
		}
	}
	if !st.enabled {
		add("enable authentication", func(ctx context.Context, cli *clientv3.Client) error {
			_, err := cli.AuthEnable(ctx)
			return err
		})
	}
	return cs, nil
}

// ours: a user or role anysched provisions.
func ours(name string) bool {
	return name == CenterIdentity || strings.HasPrefix(name, RegionalPrefix) || strings.HasPrefix(name, CheckerPrefix)
}

func addUser(name string) func(context.Context, *clientv3.Client) error {
	return func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.UserAddWithOptions(ctx, name, "", &clientv3.UserAddOptions{NoPassword: true})
		return err
	}
}

func grantRole(user, role string) func(context.Context, *clientv3.Client) error {
	return func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.UserGrantRole(ctx, user, role)
		return err
	}
}

// Apply makes the changes in order; it stops at the first that fails
// (running Plan and Apply again carries on from there).
func Apply(ctx context.Context, cli *clientv3.Client, cs []Change) error {
	_, err := apply(ctx, cli, cs)
	return err
}

func apply(ctx context.Context, cli *clientv3.Client, cs []Change) (done int, err error) {
	for i, c := range cs {
		if err := c.do(ctx, cli); err != nil {
			return i, fmt.Errorf("etcdauth: %s: %w", c.What, err)
		}
	}
	return len(cs), nil
}

// Provision plans and applies; it returns the changes made (none when etcd
// was already provisioned), also when one failed.
func Provision(ctx context.Context, cli *clientv3.Client, ids []Identity, o Options) ([]Change, error) {
	cs, err := Plan(ctx, cli, ids, o)
	if err != nil {
		return nil, err
	}
	n, err := apply(ctx, cli, cs)
	return cs[:n], err
}

// read fetches users, roles and whether auth is on.
func read(ctx context.Context, cli *clientv3.Client) (*state, error) {
	as, err := cli.AuthStatus(ctx)
	if err != nil {
		return nil, wrapRead("auth status", err)
	}
	st := &state{enabled: as.Enabled, users: map[string][]string{}, roles: map[string][]Perm{}}
	ul, err := cli.UserList(ctx)
	if err != nil {
		return nil, wrapRead("list users", err)
	}
	for _, u := range ul.Users {
		ug, err := cli.UserGet(ctx, u)
		if err != nil {
			return nil, wrapRead("user "+u, err)
		}
		st.users[u] = ug.Roles
		st.userNames = append(st.userNames, u)
	}
	rl, err := cli.RoleList(ctx)
	if err != nil {
		return nil, wrapRead("list roles", err)
	}
	for _, r := range rl.Roles {
		rg, err := cli.RoleGet(ctx, r)
		if err != nil {
			return nil, wrapRead("role "+r, err)
		}
		perms := make([]Perm, 0, len(rg.Perm))
		for _, p := range rg.Perm {
			perms = append(perms, Perm{Key: string(p.Key), RangeEnd: string(p.RangeEnd), Type: clientv3.PermissionType(p.PermType)})
		}
		st.roles[r] = perms
		st.roleNames = append(st.roleNames, r)
	}
	slices.Sort(st.userNames)
	slices.Sort(st.roleNames)
	return st, nil
}

func wrapRead(what string, err error) error {
	if errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrUserEmpty) || errors.Is(err, rpctypes.ErrUserNotFound) {
		return fmt.Errorf("etcdauth: %s: %w (managing etcd users needs the root role: a certificate with CN root, or the center's own for its embedded etcd)", what, err)
	}
	return fmt.Errorf("etcdauth: %s: %w", what, err)
}
