package lab

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/anysched/anysched/internal/testbed/chaos"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A chaos run strikes each fault of its schedule through its family's
// fault (one file each: chaos_fault_process.go, _etcd.go, _network.go,
// _operator.go), so strike records every fault's times and first error
// the same way.

// fault is one family's way to strike a fault. inject starts it and
// records when (d.Begin, d.Exited); an error ends the fault there.
type fault interface {
	inject(ctx context.Context, d *chaos.Done) error
}

// lasting is a fault that holds for d.For: heal undoes it then and
// records when it ended (d.End). An apply is not one: nothing to undo.
type lasting interface {
	fault
	heal(ctx context.Context, d *chaos.Done) error
}

// faultFor is the fault that strikes kind k; nil for a kind the lab has no
// action for.
func (l *Lab) faultFor(k chaos.Kind, cli *clientv3.Client) fault {
	switch k {
	case chaos.KillScheduler, chaos.KillCenter, chaos.KillEdge:
		return &kill{l: l, sig: syscall.SIGKILL, within: 5 * time.Second}
	case chaos.TermScheduler, chaos.TermCenter:
		return &kill{l: l, sig: syscall.SIGTERM, within: 20 * time.Second}
	case chaos.FreezeScheduler, chaos.FreezeCenter:
		return &freeze{l: l}
	case chaos.KillEtcdMember, chaos.QuorumLoss:
		return &etcdKill{kill: kill{l: l, sig: syscall.SIGKILL, within: 5 * time.Second}, cli: cli}
	case chaos.CutLink:
		return &cutLink{l: l}
	case chaos.Apply:
		return &apply{l: l}
	case chaos.Drain:
		return &drain{l: l}
	}
	return nil
}

// strike carries out one fault and undoes it, recording when.
func (l *Lab) strike(ctx context.Context, cli *clientv3.Client, d *chaos.Done) {
	f := l.faultFor(d.Kind, cli)
	if f == nil {
		fail(d, fmt.Errorf("no action for %s", d.Kind))
		return
	}
	if err := f.inject(ctx, d); err != nil {
		fail(d, err)
		return
	}
	h, ok := f.(lasting)
	if !ok {
		return
	}
	hold(ctx, d.For)
	fail(d, h.heal(ctx, d))
}

// fail records err as the fault's error unless it has one already.
func fail(d *chaos.Done, err error) {
	if err != nil && d.Err == "" {
		d.Err = err.Error()
	}
}

// hold waits out a fault's length (from the schedule) or the run's end.
func hold(ctx context.Context, x time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(x): // the fault's length, from the schedule
	}
}
