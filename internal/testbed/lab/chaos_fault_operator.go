package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/testbed/chaos"
	"github.com/anysched/anysched/internal/testbed/wait"
)

// Operator faults: what an operator does during the run through schedctl
// (a topology apply, a server's drain and undrain), retried while the
// center or the quorum is away.

// apply applies the topology with a server's weight changed.
type apply struct{ l *Lab }

func (f *apply) inject(ctx context.Context, d *chaos.Done) error {
	path, err := f.l.reweigh(d.Target, d.Weight, d.N)
	if err != nil {
		return err
	}
	o, at, err := f.l.schedctlUntil(ctx, 30*time.Second, "apply", "--yes", "-f", path)
	d.Begin, d.End = at, time.Now()
	if lines := strings.Split(strings.TrimSpace(o), "\n"); err == nil && len(lines) > 0 {
		d.Detail = lines[len(lines)-1]
	}
	return err
}

// drain drains a server and undrains it when the fault ends: in force
// from the start of the call that drained it, up to the start of the one
// that undrained it.
type drain struct{ l *Lab }

func (f *drain) inject(ctx context.Context, d *chaos.Done) error {
	// Forced, as the lab's admin: in a province of a few servers one is
	// past the removal guard's share, and the run is about the drain.
	_, at, err := f.l.schedctlUntil(ctx, 30*time.Second, "drain", "server", d.Target, "--reason", "chaos run", "--force")
	if err != nil {
		return err
	}
	d.Begin = at
	return nil
}

func (f *drain) heal(ctx context.Context, d *chaos.Done) error {
	var err error
	_, d.End, err = f.l.schedctlUntil(ctx, 30*time.Second, "undrain", "server", d.Target)
	return err
}

// schedctlUntil runs schedctl until it succeeds (the center or the quorum
// may be away), at most for limit, and returns when the call that
// succeeded started.
func (l *Lab) schedctlUntil(ctx context.Context, limit time.Duration, args ...string) (string, time.Time, error) {
	var out string
	var at time.Time
	var err error
	wait.UntilEvery(limit, 500*time.Millisecond, func() bool {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second) // a frozen center holds a call
		defer cancel()
		at = time.Now()
		out, err = l.Schedctl(tctx, args...)
		return err == nil || ctx.Err() != nil
	})
	return out, at, err
}

// reweigh writes the lab's topology with server's weight changed, for an
// apply.
func (l *Lab) reweigh(server string, weight, n int) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	found := false
	for ni := range l.Topo.Nodes {
		for si := range l.Topo.Nodes[ni].Servers {
			if l.Topo.Nodes[ni].Servers[si].Name == server {
				l.Topo.Nodes[ni].Servers[si].Weight = topology.Weight(weight)
				found = true
			}
		}
	}
	if !found {
		return "", fmt.Errorf("no server %q in the topology", server)
	}
	data, err := topogen.YAML(l.Topo)
	if err != nil {
		return "", err
	}
	path := filepath.Join(l.o.Dir, fmt.Sprintf("chaos-topology-%d.yaml", n))
	return path, os.WriteFile(path, data, 0o644)
}
