package health

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Drain kinds: what an operator can take out of service.
const (
	DrainServer = "server"
	DrainNode   = "node"
	DrainRegion = "region"
)

// Drain is an operator's decision that a target gets no new STBs. It is
// separate from health: a drained server may be perfectly healthy (being
// upgraded, say), and it stays drained across restarts until undrained.
type Drain struct {
	Kind   string    `json:"kind"`
	Name   string    `json:"name"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

func drainKey(prefix, kind, name string) string { return prefix + "drain/" + kind + "/" + name }

// ValidDrainKind reports whether kind is server, node or region.
func ValidDrainKind(kind string) bool {
	return kind == DrainServer || kind == DrainNode || kind == DrainRegion
}

// SetDrain records a drain.
func SetDrain(ctx context.Context, cli *clientv3.Client, prefix string, d Drain) error {
	if !ValidDrainKind(d.Kind) {
		return fmt.Errorf("drain kind %q: want server, node or region", d.Kind)
	}
	if d.At.IsZero() {
		d.At = time.Now().UTC()
	}
	b, _ := json.Marshal(d)
	_, err := cli.Put(ctx, drainKey(prefix, d.Kind, d.Name), string(b))
	return err
}

// ClearDrain removes a drain; existed says whether there was one.
func ClearDrain(ctx context.Context, cli *clientv3.Client, prefix, kind, name string) (existed bool, err error) {
	resp, err := cli.Delete(ctx, drainKey(prefix, kind, name))
	if err != nil {
		return false, err
	}
	return resp.Deleted > 0, nil
}

// Drill is a failover drill in force for a region (key drill/<region>, under a
// lease that ends shortly after Until, so a forgotten drill cleans itself up).
type Drill struct {
	Region  string    `json:"region"`
	Until   time.Time `json:"until"`
	Started time.Time `json:"started"`
}

// StartDrill records a drill for region lasting d.
func StartDrill(ctx context.Context, cli *clientv3.Client, prefix, region string, d time.Duration) (Drill, error) {
	dr := Drill{Region: region, Started: time.Now().UTC(), Until: time.Now().UTC().Add(d)}
	lease, err := cli.Grant(ctx, int64(d/time.Second)+10)
	if err != nil {
		return dr, err
	}
	b, _ := json.Marshal(dr)
	_, err = cli.Put(ctx, prefix+"drill/"+region, string(b), clientv3.WithLease(lease.ID))
	return dr, err
}
