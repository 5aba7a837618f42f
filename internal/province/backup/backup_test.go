package backup_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/backup"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/security/signing"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func signer(t *testing.T) *signing.Signer {
	k, err := signing.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return signing.NewSigner(k)
}

// lostProvince is a store with three signed applies and a drain, and the
// backup taken of it, encoded.
func lostProvince(t *testing.T, ctx context.Context, center *signing.Signer) (*store.Store, []byte) {
	t.Helper()
	e := etcdtest.Start(t)
	st := e.Store()
	for w := 100; w <= 102; w++ {
		if _, err := st.Apply(ctx, fixture.Weighted(t, w), store.ApplyOptions{Signer: center}); err != nil {
			t.Fatal(err)
		}
	}
	d := opstate.Drain{Kind: "server", Name: fixture.Weighted(t, 100).Nodes[0].Servers[0].Name, Reason: "disk swap", At: time.Now()}
	if err := opstate.SetDrain(ctx, e.Client(), e.Prefix, center, d); err != nil {
		t.Fatal(err)
	}
	b, err := backup.Take(ctx, e.Client(), e.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := b.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	return st, buf.Bytes()
}

func TestRestoreIntoAnEmptyStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	center := signer(t)
	lost, data := lostProvince(t, ctx, center)
	lostPtr, err := lost.CurrentPointer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("PRIVATE KEY")) {
		t.Fatal("the backup holds a private key")
	}
	b, err := backup.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.KeyIDs) != 1 || b.KeyIDs[0] != center.KeyID() {
		t.Errorf("key ids %v, want the center's %s", b.KeyIDs, center.KeyID())
	}
	e := etcdtest.Start(t)
	st := e.Store()
	c, err := backup.Check(b, e.Prefix, topology.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	res, err := backup.Restore(ctx, st, c, backup.Options{Signer: center, Identity: "test"})
	if err != nil {
		t.Fatal(err)
	}
	now, err := st.CurrentPointer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if now.Digest != lostPtr.Digest || now.Seq != lostPtr.Seq+1 || now.Epoch <= lostPtr.Epoch || res.Epoch != now.Epoch {
		t.Errorf("restored pointer: %.12s sequence %d epoch %d; want %.12s, sequence %d, an epoch after %d", now.Digest, now.Seq, now.Epoch, lostPtr.Digest, lostPtr.Seq+1, lostPtr.Epoch)
	}
	v := signing.NewVerifier(center.Public())
	if err := v.VerifyPointer(now.Signed, now.KeyID, now.Signature); err != nil {
		t.Errorf("restored pointer: %v", err)
	}
	if !now.Signed.Before(lostPtr.Signed) && lostPtr.Signed.Before(now.Signed) {
		// as wanted: the lost pointer is before the restored one
	} else {
		t.Errorf("the lost store's pointer is not ordered before the restored one")
	}
	hist, err := st.History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 4 || !strings.HasPrefix(hist[0].Note, "restore of the backup") {
		t.Errorf("history: %d entries, newest %q; want the 3 applies and the restore", len(hist), hist[0].Note)
	}
	drains, err := e.Client().Get(ctx, e.Prefix+"drain/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || drains.Count != 1 {
		t.Errorf("drains restored: %v, %v; want 1", drains.Count, err)
	}

	// Not into a store that holds a province, unless forced.
	if _, err := backup.Restore(ctx, st, c, backup.Options{Signer: center}); !errors.Is(err, backup.ErrNotEmpty) {
		t.Errorf("restore into a restored store: %v, want ErrNotEmpty", err)
	}
	// Forced over a store that moved on: a drain the backup does not hold
	// is gone, its own drain stays, its topology is current again.
	extra := opstate.Drain{Kind: "server", Name: fixture.Weighted(t, 100).Nodes[0].Servers[1].Name, Reason: "after the backup", At: time.Now()}
	if err := opstate.SetDrain(ctx, e.Client(), e.Prefix, center, extra); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(ctx, fixture.Weighted(t, 150), store.ApplyOptions{Signer: center}); err != nil {
		t.Fatal(err)
	}
	kept := fixture.Weighted(t, 100).Nodes[0].Servers[0].Name // the backup's drain
	// What the cities watch meanwhile: the pointer and the backup's drain
	// are never deleted (they would see no topology, the drain lifted).
	from, err := e.Client().Get(ctx, e.Prefix+"topology/current")
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watch := e.Client().Watch(wctx, e.Prefix, clientv3.WithPrefix(), clientv3.WithRev(from.Header.Revision+1))
	forced, err := backup.Restore(ctx, st, c, backup.Options{Signer: center, Force: true})
	if err != nil {
		t.Fatalf("forced restore: %v", err)
	}
	end, err := e.Client().Get(ctx, e.Prefix+"topology/current")
	if err != nil {
		t.Fatal(err)
	}
	for seen := from.Header.Revision; seen < end.Header.Revision; {
		wr := <-watch
		if err := wr.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range wr.Events {
			seen = max(seen, ev.Kv.ModRevision)
			k := strings.TrimPrefix(string(ev.Kv.Key), e.Prefix)
			if ev.Type == clientv3.EventTypeDelete && (k == "topology/current" || strings.HasSuffix(k, "/"+kept)) {
				t.Errorf("the forced restore deleted %s while it ran", k)
			}
		}
	}
	after, err := st.CurrentPointer(ctx)
	if err != nil || after.Digest != lostPtr.Digest || after.Epoch != forced.Epoch || after.Seq != forced.Seq {
		t.Errorf("after the forced restore: %.12s epoch %d seq %d (%v); want %.12s, the result's epoch %d seq %d", after.Digest, after.Epoch, after.Seq, err, lostPtr.Digest, forced.Epoch, forced.Seq)
	}
	left, err := e.Client().Get(ctx, e.Prefix+"drain/", clientv3.WithPrefix())
	if err != nil || len(left.Kvs) != 1 || !bytes.Contains(left.Kvs[0].Value, []byte("disk swap")) {
		t.Errorf("drains after the forced restore: %d (%v); want the backup's one only", len(left.Kvs), err)
	}
}

// TestRestoredEpochFollowsTheBackups: a center whose clock is behind the
// lost store's founding still founds a later epoch (EpochAfter), not one
// every reader would refuse as a replay.
func TestRestoredEpochFollowsTheBackups(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := etcdtest.Start(t).Store()
	ahead := time.Now().Add(time.Hour).UnixNano() // the lost store's founding, by a clock an hour ahead
	res, err := st.Apply(ctx, fixture.Weighted(t, 100), store.ApplyOptions{NewEpoch: true, EpochAfter: ahead})
	if err != nil {
		t.Fatal(err)
	}
	if res.Epoch <= ahead {
		t.Errorf("epoch %d, want after the backup's %d", res.Epoch, ahead)
	}
}

// A bad backup is refused whole, naming what was wrong, before anything
// is written.
func TestCheckRefusesABadBackup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, data := lostProvince(t, ctx, signer(t))
	const prefix = "/anysched/"
	for _, tc := range []struct {
		name   string
		prefix string // the backup's province, when not the store's
		edit   func(b *backup.Backup)
		want   string
	}{
		{name: "another province", prefix: "/other/", want: `of the province under "/other/"`},
		{name: "a key out of scope", edit: func(b *backup.Backup) {
			b.Keys = append(b.Keys, backup.KV{Key: "instances/hefei/x", Value: []byte("{}")})
		}, want: `key "instances/hefei/x": not something a backup holds`},
		{name: "a key twice", edit: func(b *backup.Backup) { b.Keys = append(b.Keys, b.Keys[0]) }, want: "twice"},
		{name: "a part missing", edit: func(b *backup.Backup) {
			for i, kv := range b.Keys {
				if strings.HasPrefix(kv.Key, "topology/blobs/") && strings.HasSuffix(kv.Key, "/000000") {
					b.Keys[i].Key = strings.TrimSuffix(kv.Key, "0") + "7"
					return
				}
			}
		}, want: "part 0 missing"},
		{name: "the current document missing", edit: func(b *backup.Backup) { b.Keys = drop(b.Keys, "topology/blobs/"+b.Digest, "") }, want: "is not in the backup whole"},
		{name: "a part altered", edit: func(b *backup.Backup) {
			for i, kv := range b.Keys {
				if strings.HasPrefix(kv.Key, "topology/blobs/") {
					b.Keys[i].Value = append([]byte(nil), kv.Value[:len(kv.Value)-4]...)
					return
				}
			}
		}, want: "document "},
		{name: "no current pointer", edit: func(b *backup.Backup) { b.Keys = drop(b.Keys, "topology/current", "") }, want: "topology/current: missing"},
		{name: "a history entry moved", edit: func(b *backup.Backup) {
			for i, kv := range b.Keys {
				if strings.HasPrefix(kv.Key, "topology/history/") {
					b.Keys[i].Key = "topology/history/000000000099"
					return
				}
			}
		}, want: "under another key"},
		{name: "a drain that does not read", edit: func(b *backup.Backup) {
			b.Keys = append(b.Keys, backup.KV{Key: "drain/server/x", Value: []byte("not json")})
		}, want: `key "drain/server/x": not a drain`},
		{name: "a drain of a newer release", edit: func(b *backup.Backup) {
			b.Keys = append(b.Keys, backup.KV{Key: "drain/server/x", Value: []byte(`{"kind":"server","name":"x","at":"2026-12-01T00:00:00Z","format":99}`)})
		}, want: `key "drain/server/x": a drain in format 99`},
		{name: "a drain of another target", edit: func(b *backup.Backup) {
			b.Keys = append(b.Keys, backup.KV{Key: "drain/server/x", Value: []byte(`{"kind":"server","name":"y","at":"2026-12-01T00:00:00Z"}`)})
		}, want: "names another target (server y) than its key"},
		{name: "a drain's signature moved", edit: func(b *backup.Backup) {
			b.Keys = append(b.Keys, backup.KV{Key: "drain/server/x", Value: []byte(`{"signature":{"key_id":"k","signed_at":"2026-12-01T00:00:00Z","sig":"AA=="},"kind":"server","name":"x","at":"2026-12-01T00:00:00Z"}`)})
		}, want: "not where or as the center writes it"},
		{name: "a balance policy that does not parse", edit: func(b *backup.Backup) {
			b.Keys = append(b.Keys, backup.KV{Key: "balance/config", Value: []byte("no_such_field: 1\n")})
		}, want: `key "balance/config": not a balance policy`},
		{name: "another current than it names", edit: func(b *backup.Backup) { b.Seq++ }, want: "is not the one it names"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := backup.Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			if tc.edit != nil {
				tc.edit(b)
			}
			if tc.prefix != "" {
				b.Province = tc.prefix
			}
			_, err = backup.Check(b, prefix, topology.DefaultLimits)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check: %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if _, err := backup.Decode([]byte("not gzip")); err == nil || !strings.Contains(err.Error(), "not a backup") {
		t.Errorf("Decode of garbage: %v", err)
	}
}

// drop removes the first key with prefix and suffix.
func drop(kvs []backup.KV, prefix, suffix string) []backup.KV {
	for i, kv := range kvs {
		if strings.HasPrefix(kv.Key, prefix) && strings.HasSuffix(kv.Key, suffix) {
			return append(kvs[:i:i], kvs[i+1:]...)
		}
	}
	return kvs
}
