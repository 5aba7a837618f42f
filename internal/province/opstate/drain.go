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
//
// A scheduled drain has a window, From (zero: from when it is written) to
// Until (zero: until undrained): every scheduler applies it only inside,
// by its own clock. The window is in the signed value; a drain of the
// release before has none and is in force until undrained, as it was.
type Drain struct {
	Kind   DrainKind `json:"kind"`
	Name   string    `json:"name"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
	Forced bool      `json:"forced,omitempty"`
	From   time.Time `json:"from,omitzero"`
	Until  time.Time `json:"until,omitzero"`
	// Format is the document's format version (Format; absent is 1).
	Format int `json:"format,omitempty"`
}

// DrainState is where now falls in a drain's window.
type DrainState string

// Drain states.
const (
	DrainPending DrainState = "pending" // its window has not begun
	DrainActive  DrainState = "active"  // in force
	DrainEnded   DrainState = "ended"   // its window is over; the center deletes it
)

// State is the drain's state at now: active inside [From, Until).
func (d Drain) State(now time.Time) DrainState {
	switch {
	case !d.From.IsZero() && now.Before(d.From):
		return DrainPending
	case !d.Until.IsZero() && !now.Before(d.Until):
		return DrainEnded
	}
	return DrainActive
}

// Scheduled says whether the drain has a window (a start or an end).
func (d Drain) Scheduled() bool { return !d.From.IsZero() || !d.Until.IsZero() }

// Window is the drain's window in words: "" without one, else
// "FROM – UNTIL" in RFC 3339, "now" or "undrain" for an open side.
func (d Drain) Window() string {
	if !d.Scheduled() {
		return ""
	}
	from, until := "now", "undrain"
	if !d.From.IsZero() {
		from = d.From.Format(time.RFC3339)
	}
	if !d.Until.IsZero() {
		until = d.Until.Format(time.RFC3339)
	}
	return from + " – " + until
}

// nextBoundary is the drain's first window boundary after now, if any.
func (d Drain) nextBoundary(now time.Time) (time.Time, bool) {
	switch {
	case !d.From.IsZero() && d.From.After(now):
		return d.From, true
	case !d.Until.IsZero() && d.Until.After(now):
		return d.Until, true
	}
	return time.Time{}, false
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
	if !d.From.IsZero() && !d.Until.IsZero() && !d.Until.After(d.From) {
		return fmt.Errorf("opstate: drain until: %s is not after from %s", d.Until.Format(time.RFC3339), d.From.Format(time.RFC3339))
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

// EndDrain deletes the drain stored for d's target if it is still d (the
// value the caller read, by At and window) and its window has ended at now:
// the center's housekeeping, which must not delete a drain an operator
// set again meanwhile. ended says whether it deleted it.
func EndDrain(ctx context.Context, cli *clientv3.Client, prefix string, d Drain, now time.Time) (ended bool, err error) {
	if d.State(now) != DrainEnded {
		return false, nil
	}
	key := drainKey(prefix, d.Kind, d.Name)
	resp, err := cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) == 0 {
		return false, err
	}
	kv := resp.Kvs[0]
	body, _, _ := openJSON(kv.Value) // the caller's drain came verified from the watcher; this only compares
	var stored Drain
	if json.Unmarshal(body, &stored) != nil || !stored.At.Equal(d.At) || !stored.Until.Equal(d.Until) || !stored.From.Equal(d.From) {
		return false, nil
	}
	tr, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return false, err
	}
	return tr.Succeeded, nil
}

// ClearDrain removes a drain; existed says whether there was one.
func ClearDrain(ctx context.Context, cli *clientv3.Client, prefix string, kind DrainKind, name string) (existed bool, err error) {
	resp, err := cli.Delete(ctx, drainKey(prefix, kind, name))
	if err != nil {
		return false, err
	}
	return resp.Deleted > 0, nil
}
