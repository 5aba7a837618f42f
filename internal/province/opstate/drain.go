package opstate

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/security/signing"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DrainKind is what an operator drains.
type DrainKind string

// Drain kinds.
const (
	DrainServer DrainKind = "server"
	DrainNode   DrainKind = "node"
	DrainRegion DrainKind = "region"
)

// ParseDrainKind accepts server, node or region.
func ParseDrainKind(s string) (DrainKind, error) {
	switch k := DrainKind(s); k {
	case DrainServer, DrainNode, DrainRegion:
		return k, nil
	}
	return "", fmt.Errorf("kind: %q is not server, node or region", s)
}

// Drain is an operator's decision that a target gets no new STBs. It is
// separate from health: a drained server may be perfectly healthy (being
// upgraded, say), and it stays drained across restarts until undrained.
type Drain struct {
	Kind   DrainKind `json:"kind"`
	Name   string    `json:"name"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
	Forced bool      `json:"forced,omitempty"`
}

// String is "kind name (reason)", as status and explain show it.
func (d Drain) String() string {
	s := string(d.Kind) + " " + d.Name
	if d.Reason != "" {
		s += " (" + d.Reason + ")"
	}
	return s
}

func drainKey(prefix string, kind DrainKind, name string) string {
	return prefix + keyspace.Drain(string(kind), name)
}

// SetDrain records a drain, signed by signer (nil: unsigned, for a center
// without apply.signing_key_file). Forced says an admin passed the guard
// that no drain empties a region; schedulers apply it even then.
func SetDrain(ctx context.Context, cli *clientv3.Client, prefix string, signer *signing.Signer, d Drain) error {
	if _, err := ParseDrainKind(string(d.Kind)); err != nil {
		return fmt.Errorf("opstate: drain %w", err)
	}
	if d.Name == "" {
		return fmt.Errorf("opstate: drain name: required")
	}
	if d.At.IsZero() {
		d.At = time.Now().UTC()
	}
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("opstate: drain: %w", err)
	}
	key := keyspace.Drain(string(d.Kind), d.Name)
	if b, err = sealJSON(signer, signing.OpDrain, prefix, key, b); err != nil {
		return err
	}
	_, err = cli.Put(ctx, prefix+key, string(b))
	return err
}

// ClearDrain removes a drain; existed says whether there was one.
func ClearDrain(ctx context.Context, cli *clientv3.Client, prefix string, kind DrainKind, name string) (existed bool, err error) {
	resp, err := cli.Delete(ctx, drainKey(prefix, kind, name))
	if err != nil {
		return false, err
	}
	return resp.Deleted > 0, nil
}
