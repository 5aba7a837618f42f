package etcdtest

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zapcore"

	"github.com/anysched/anysched/internal/etcd/etcdauth"
	"github.com/anysched/anysched/internal/wiring/obs"
)

// User is an etcd user for EnableAuth: a role of its own name holding
// Perms, and a password that is its name.
type User struct {
	Name  string
	Perms []etcdauth.Perm
}

// Identity is the user of an anysched etcd identity (etcdauth.ParseIdentity's
// spec), with what etcdauth.Permissions gives it under the prefix, as a
// center provisions it.
func (e *Etcd) Identity(spec string) User {
	e.t.Helper()
	id, err := etcdauth.ParseIdentity(spec)
	if err != nil {
		e.t.Fatal(err)
	}
	return User{Name: id.Name, Perms: etcdauth.Permissions(e.Prefix, id)}
}

// EnableAuth adds root (password "root") and users, then turns etcd's
// authentication on: from then on only Login's clients have rights.
func (e *Etcd) EnableAuth(users ...User) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := e.Client()
	steps := []func() error{
		func() error { _, err := admin.UserAdd(ctx, etcdauth.RootUser, etcdauth.RootUser); return err },
		func() error { _, err := admin.UserGrantRole(ctx, etcdauth.RootUser, "root"); return err },
	}
	for _, u := range users {
		steps = append(steps,
			func() error { _, err := admin.RoleAdd(ctx, u.Name); return err },
			func() error { return Grant(ctx, admin, u) },
			func() error { _, err := admin.UserAdd(ctx, u.Name, u.Name); return err },
			func() error { _, err := admin.UserGrantRole(ctx, u.Name, u.Name); return err })
	}
	steps = append(steps, func() error { _, err := admin.AuthEnable(ctx); return err })
	for _, step := range steps {
		if err := step(); err != nil {
			e.t.Fatal(err)
		}
	}
}

// Grant grants u's role its Perms (again, after a revocation: as a
// center's start provisions the roles afresh).
func Grant(ctx context.Context, cli *clientv3.Client, u User) error {
	for _, p := range u.Perms {
		if _, err := cli.RoleGrantPermission(ctx, u.Name, p.Key, p.RangeEnd, p.Type); err != nil {
			return err
		}
	}
	return nil
}

// Login is a client of user (EnableAuth's, or root), closed at the end of
// the test.
func (e *Etcd) Login(user string) *clientv3.Client {
	e.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, Username: user, Password: user, DialTimeout: 5 * time.Second,
		Logger: obs.ZapLogger(e.Logger.With("component", "etcd-client"), zapcore.ErrorLevel)})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cli.Close() })
	return cli
}
