// Package backup takes what rebuilding a province needs out of its store
// and writes it into an empty one: the topology (the current document, the
// kept documents and the history) and the operator state (drains and
// maintenance windows, the balance policy), with the ids of the keys that
// signed them and the store's roles, recorded for comparison. It holds no
// secret: no private key, no password, no certificate. What the living
// daemons write again by themselves (instance records, health verdicts,
// claims, plan state), drills (under a lease, ended by the loss) and the
// audit trail are left out.
package backup

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/security/signing"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Format names this layout; a backup of another is refused.
const Format = "anysched-backup-v1"

// MaxBytes bounds a backup, compressed and decompressed.
const MaxBytes = 100 << 20

// scope is what a backup holds, relative to the province's prefix: keys
// and prefixes (ending in "/").
var scope = []string{keyspace.KeyTopologyCurrent, keyspace.PrefixTopologyBlobs, keyspace.PrefixTopologyHistory, keyspace.PrefixDrain, keyspace.KeyBalance}

func inScope(k string) bool {
	for _, s := range scope {
		if k == s || strings.HasSuffix(s, "/") && strings.HasPrefix(k, s) && k != s {
			return true
		}
	}
	return false
}

// IsDrain reports whether a backup's key is a drain's (or a maintenance
// window's).
func IsDrain(key string) bool { return strings.HasPrefix(key, keyspace.PrefixDrain) }

// Backup is one province's state at one store revision.
type Backup struct {
	Format   string    `json:"format"`
	Province string    `json:"province"` // the store's key prefix, which every signature covers
	TakenAt  time.Time `json:"taken_at"`
	Revision int64     `json:"revision"` // the store revision it was read at
	// The current topology's place and document (signing.Pointer).
	Epoch  int64  `json:"epoch,omitempty"`
	Seq    int64  `json:"seq,omitempty"`
	Digest string `json:"digest,omitempty"`
	// KeyIDs are the ids of the public keys that signed the topology
	// documents and operator state it holds.
	KeyIDs []string `json:"key_ids,omitempty"`
	// Roles are the store's etcd roles and their permissions when it was
	// taken, for comparison after a restore: the center provisions roles
	// at start, a restore never writes them.
	Roles []Role `json:"roles,omitempty"`
	Keys  []KV   `json:"keys"`
}

// KV is one key, relative to the prefix, and its value as stored.
type KV struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// Role is an etcd role: its name and its permissions, one a line
// ("readwrite /anysched/drain/ prefix").
type Role struct {
	Name        string   `json:"name"`
	Permissions []string `json:"permissions"`
}

// Take reads a backup of the province under prefix, every key at one
// revision.
func Take(ctx context.Context, cli *clientv3.Client, prefix string) (*Backup, error) {
	ops := make([]clientv3.Op, len(scope))
	for i, k := range scope {
		if strings.HasSuffix(k, "/") {
			ops[i] = clientv3.OpGet(prefix+k, clientv3.WithPrefix())
		} else {
			ops[i] = clientv3.OpGet(prefix + k)
		}
	}
	resp, err := cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("backup: read the province: %w", err)
	}
	b := &Backup{Format: Format, Province: prefix, TakenAt: time.Now().UTC(), Revision: resp.Header.Revision}
	keys := map[string][]byte{}
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().Kvs {
			rel := strings.TrimPrefix(string(kv.Key), prefix)
			b.Keys = append(b.Keys, KV{Key: rel, Value: kv.Value})
			keys[rel] = kv.Value
		}
	}
	cur, _, err := store.CheckTopology(keys)
	if err != nil {
		return nil, fmt.Errorf("backup: the store's topology: %w", err)
	}
	if cur != nil {
		b.Epoch, b.Seq, b.Digest = cur.Epoch, cur.Seq, cur.Digest
	}
	b.KeyIDs = keyIDs(b.Keys)
	b.Roles, err = Roles(ctx, cli)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Roles lists the store's etcd roles; none when authentication is off.
func Roles(ctx context.Context, cli *clientv3.Client) ([]Role, error) {
	list, err := cli.RoleList(ctx)
	if err != nil {
		if errors.Is(err, rpctypes.ErrAuthNotEnabled) {
			return nil, nil
		}
		return nil, fmt.Errorf("backup: list etcd roles: %w", err)
	}
	var roles []Role
	for _, name := range list.Roles {
		r, err := cli.RoleGet(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("backup: read etcd role %s: %w", name, err)
		}
		role := Role{Name: name}
		for _, p := range r.Perm {
			kind := "key"
			if len(p.RangeEnd) > 0 {
				kind = "range to " + string(p.RangeEnd)
			}
			role.Permissions = append(role.Permissions, fmt.Sprintf("%s %s %s", strings.ToLower(p.PermType.String()), p.Key, kind))
		}
		slices.Sort(role.Permissions)
		roles = append(roles, role)
	}
	return roles, nil
}

// keyIDs are the signing key ids named in values: a pointer's or history
// entry's "key_id", an operator state value's signature's.
func keyIDs(kvs []KV) []string {
	var ids []string
	for _, kv := range kvs {
		switch {
		case strings.HasPrefix(kv.Key, keyspace.PrefixTopologyBlobs):
		case IsDrain(kv.Key) || kv.Key == keyspace.KeyBalance:
			id, _ := opstate.Inspect(kv.Key, kv.Value)
			ids = append(ids, id)
		default:
			var v struct {
				KeyID string `json:"key_id"`
			}
			if json.Unmarshal(kv.Value, &v) == nil {
				ids = append(ids, v.KeyID)
			}
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	return slices.DeleteFunc(ids, func(s string) bool { return s == "" })
}

// Encode writes b gzip'd JSON.
func (b *Backup) Encode(w io.Writer) error {
	zw := gzip.NewWriter(w)
	if err := json.NewEncoder(zw).Encode(b); err != nil {
		return err
	}
	return zw.Close()
}

// Decode reads a backup Encode wrote, at most MaxBytes decompressed.
func Decode(data []byte) (*Backup, error) {
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("backup: %d bytes, more than %d", len(data), MaxBytes)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("backup: not a backup (gzip'd JSON): %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("backup: decompress: %w", err)
	}
	if len(raw) > MaxBytes {
		return nil, fmt.Errorf("backup: more than %d bytes decompressed", MaxBytes)
	}
	var b Backup
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, fmt.Errorf("backup: does not read: %w", err)
	}
	if b.Format != Format {
		return nil, fmt.Errorf("backup: format %q, this release reads %q", b.Format, Format)
	}
	return &b, nil
}

// Checked is a backup that passed Check, ready to restore.
type Checked struct {
	*Backup
	keys     map[string][]byte
	topology *store.Stored // nil: the backup holds none
	source   []byte
	// Drains is how many drains (and maintenance windows) it holds.
	Drains int
}

// Check validates a whole backup for the province under prefix, before
// anything is written: its province, every key in scope and once, the
// topology whole and compiling under limits, each drain and the balance
// policy readable. The first problem found is returned, naming it.
func Check(b *Backup, prefix string, limits topology.Limits) (*Checked, error) {
	if b.Province != prefix {
		return nil, fmt.Errorf("backup: of the province under %q, this store's is %q (every signature covers the prefix)", b.Province, prefix)
	}
	c := &Checked{Backup: b, keys: make(map[string][]byte, len(b.Keys))}
	for _, kv := range b.Keys {
		if !inScope(kv.Key) {
			return nil, fmt.Errorf("backup: key %q: not something a backup holds (%s)", kv.Key, strings.Join(scope, ", "))
		}
		if _, dup := c.keys[kv.Key]; dup {
			return nil, fmt.Errorf("backup: key %q: twice", kv.Key)
		}
		c.keys[kv.Key] = kv.Value
		if IsDrain(kv.Key) || kv.Key == keyspace.KeyBalance {
			// Restored state a scheduler would ignore is state lost
			// without a word: refuse the backup instead.
			if _, err := opstate.Inspect(kv.Key, kv.Value); err != nil {
				return nil, fmt.Errorf("backup: key %q: %w", kv.Key, err)
			}
		}
		if IsDrain(kv.Key) {
			c.Drains++
		}
	}
	st, src, err := store.CheckTopology(c.keys)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if st != nil {
		if st.Digest != b.Digest || st.Seq != b.Seq || st.Epoch != b.Epoch {
			return nil, fmt.Errorf("backup: its topology/current (sequence %d, %.12s) is not the one it names (sequence %d, %.12s)", st.Seq, st.Digest, b.Seq, b.Digest)
		}
		if _, err := limits.Compile(st.Topology, 0); err != nil {
			return nil, fmt.Errorf("backup: the current topology (%.12s) does not validate: %w", st.Digest, err)
		}
		// Restored, the document is applied again: refuse one this release
		// would store as another document (another canonical encoding)
		// before anything is written, not after.
		if _, digest, err := store.Canonical(st.Topology); err != nil || digest != st.Digest {
			return nil, fmt.Errorf("backup: the current topology (%.12s) would be restored as another document (%.12s, %v): restore it with the release that took the backup", st.Digest, digest, err)
		}
	}
	c.topology, c.source = st, src
	return c, nil
}

// ErrNotEmpty refuses a restore into a store that holds a topology or
// operator state.
var ErrNotEmpty = errors.New("the store is not empty")

// Options control Restore.
type Options struct {
	// Force restores into a store that is not empty: what the backup's
	// scope holds there is deleted first.
	Force bool
	// Signer signs the restored topology pointer (nil: unsigned).
	Signer *signing.Signer
	// Identity is who restores, for the history entry.
	Identity string
	// Keep is how many revisions' documents stay in etcd (the center's
	// apply.history_keep; 0: the store's default).
	Keep int
}

// Result says what Restore wrote.
type Result struct {
	Keys     int   // keys written besides the pointer
	Revision int64 // the restored topology's revision (0: none)
	Epoch    int64 // the new epoch
	Seq      int64
}

// batchBytes bounds one write transaction, under etcd's request limit.
const batchBytes = 1 << 20

// Restore writes a checked backup into the store: the documents, the
// history and the operator state, then the current topology as a new
// apply founding a new epoch, signed by o.Signer, so that every reader,
// whatever it served before the store was lost, takes it (and no pointer
// of the lost store can be put back over it).
func Restore(ctx context.Context, st *store.Store, c *Checked, o Options) (Result, error) {
	cli, prefix := st.Client(), st.Prefix()
	n, err := held(ctx, cli, prefix)
	if err != nil {
		return Result{}, err
	}
	if n > 0 && !o.Force {
		return Result{}, fmt.Errorf("%w: it holds %d key(s) a backup restores (topology, drains, balance); restore into an empty store, or force to replace them", ErrNotEmpty, n)
	}
	// Forced: what the scope held is replaced, not cleared first. The
	// backup's keys are put over it and its topology made current, and only
	// then is what the backup does not hold deleted, so that the cities
	// never see a store without a topology or with its drains lifted, and
	// a write that fails leaves the old state, not half of either.
	var stale []string
	if n > 0 {
		if stale, err = scopeKeys(ctx, cli, prefix); err != nil {
			return Result{}, err
		}
	}
	var res Result
	var ops []clientv3.Op
	size := 0
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			return fmt.Errorf("restore: write: %w", err)
		}
		ops, size = ops[:0], 0
		return nil
	}
	for _, kv := range c.Keys {
		if kv.Key == keyspace.KeyTopologyCurrent {
			continue
		}
		if size+len(kv.Value) > batchBytes || len(ops) >= 100 {
			if err := flush(); err != nil {
				return res, err
			}
		}
		ops = append(ops, clientv3.OpPut(prefix+kv.Key, string(kv.Value)))
		size += len(kv.Key) + len(kv.Value)
		res.Keys++
	}
	if err := flush(); err != nil {
		return res, err
	}
	if c.topology != nil {
		note := fmt.Sprintf("restore of the backup taken %s (sequence %d)", c.TakenAt.Format(time.RFC3339), c.Seq)
		ar, err := st.Apply(ctx, c.topology.Topology, store.ApplyOptions{Force: true, NewEpoch: true, EpochAfter: c.Epoch,
			Signer: o.Signer, Identity: o.Identity, Note: note, Source: c.source, Keep: o.Keep})
		if err != nil {
			return res, fmt.Errorf("restore: make the backup's topology current: %w", err)
		}
		res.Revision, res.Epoch, res.Seq = ar.Revision, ar.Epoch, ar.Seq
	}
	// What the scope held that the backup does not (the apply above wrote
	// its own documents and history entry after this list was read).
	for _, k := range stale {
		if _, ok := c.keys[k]; ok || k == keyspace.KeyTopologyCurrent {
			continue
		}
		if _, err := cli.Delete(ctx, prefix+k); err != nil {
			return res, fmt.Errorf("restore: delete %s, which the backup does not hold: %w", k, err)
		}
	}
	return res, nil
}

// scopeKeys lists the keys in the backup's scope the store holds, without
// the prefix.
func scopeKeys(ctx context.Context, cli *clientv3.Client, prefix string) ([]string, error) {
	var out []string
	for _, s := range scope {
		opts := []clientv3.OpOption{clientv3.WithKeysOnly()}
		if strings.HasSuffix(s, "/") {
			opts = append(opts, clientv3.WithPrefix())
		}
		resp, err := cli.Get(ctx, prefix+s, opts...)
		if err != nil {
			return nil, fmt.Errorf("restore: read the store: %w", err)
		}
		for _, kv := range resp.Kvs {
			out = append(out, strings.TrimPrefix(string(kv.Key), prefix))
		}
	}
	return out, nil
}

// held counts the keys in the backup's scope the store holds.
func held(ctx context.Context, cli *clientv3.Client, prefix string) (int64, error) {
	var n int64
	for _, s := range scope {
		opts := []clientv3.OpOption{clientv3.WithCountOnly()}
		if strings.HasSuffix(s, "/") {
			opts = append(opts, clientv3.WithPrefix())
		}
		resp, err := cli.Get(ctx, prefix+s, opts...)
		if err != nil {
			return 0, fmt.Errorf("restore: read the store: %w", err)
		}
		n += resp.Count
	}
	return n, nil
}

// RoleDiff says how the store's roles differ from the backup's: roles
// missing, extra, or with other permissions; none when they agree.
func RoleDiff(backup, now []Role) []string {
	have := map[string][]string{}
	for _, r := range now {
		have[r.Name] = r.Permissions
	}
	var out []string
	for _, r := range backup {
		p, ok := have[r.Name]
		switch {
		case !ok:
			out = append(out, "role "+r.Name+": in the backup, not in the store")
		case !slices.Equal(p, r.Permissions):
			out = append(out, "role "+r.Name+": other permissions than in the backup")
		}
		delete(have, r.Name)
	}
	for name := range have {
		out = append(out, "role "+name+": in the store, not in the backup")
	}
	slices.Sort(out)
	return out
}
