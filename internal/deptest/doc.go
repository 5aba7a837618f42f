// Package deptest guards the direction of imports, as Tailscale's deptest
// does: its tests read the module's import graph (go list -deps) and fail,
// naming the chain of imports, when
//
//   - a package of the STB hot path (steer, the front ends, balance,
//     topology, the access log, overflow, outlier, GeoIP, tokens, health's
//     avail) links the etcd client, the etcd server or GoBGP: answering an
//     STB does no etcd I/O and announces nothing;
//   - schedctl or healthcheck links the etcd server or GoBGP: a binary
//     links only what it runs (internal/etcd/etcdserver and internal/routing/announce
//     are the schedulers');
//   - regional-scheduler links the etcd server: only the center runs an
//     embedded member (internal/wiring/app/center);
//   - a package under internal/ imports a main package;
//   - a package that ships imports internal/testbed (only the testbed, the
//     bench programs and the lab binary may).
//
// It has no code of its own: the checks are in deptest_test.go.
package deptest
