package lab

import (
	"context"
	"strings"

	"github.com/anysched/anysched/internal/testbed/chaos"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcd faults: one member killed (the leader at the time, or a named one),
// or a quorum (Target "etcd1+etcd3"), restarted when the fault ends.

// etcdKill is a kill of etcd members (SIGKILL).
type etcdKill struct {
	kill
	cli *clientv3.Client // asks the cluster who leads
}

func (f *etcdKill) inject(ctx context.Context, d *chaos.Done) error {
	names := strings.Split(d.Target, "+")
	if d.Target == "leader" {
		k, err := f.l.EtcdLeader(ctx, f.cli)
		if err != nil {
			return err
		}
		names = []string{etcdName(k)}
		d.Detail = "the leader was " + etcdName(k)
	}
	return f.killAll(d, names...)
}
