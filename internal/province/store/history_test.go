package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/security/signing"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
)

// Every apply leaves a history entry written with the pointer; the last
// Keep revisions' documents stay readable, older entries say they are not.
func TestHistoryKeepsLastRevisions(t *testing.T) {
	st := etcdtest.Start(t).Store()
	c := ctx(t)
	var revs []int64
	for w := 100; w < 105; w++ {
		res, err := st.Apply(c, fixture.Weighted(t, w), store.ApplyOptions{Keep: 3, Identity: "alice", Note: "apply", Change: "1 server changed"})
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, res.Revision)
	}
	// An unchanged document is not an apply: no entry.
	if _, err := st.Apply(c, fixture.Weighted(t, 104), store.ApplyOptions{Keep: 3}); err != nil {
		t.Fatal(err)
	}
	h, err := st.History(c, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 5 {
		t.Fatalf("%d history entries after 5 applies, want 5: %+v", len(h), h)
	}
	for i, e := range h {
		want := revs[len(revs)-1-i] // newest first
		if e.Revision != want || e.Identity != "alice" || e.Note != "apply" || e.Change != "1 server changed" || e.Counts.Servers == 0 {
			t.Errorf("entry %d = %+v, want revision %d by alice", i, e, want)
		}
		if wantKept := i < 3; e.Kept != wantKept {
			t.Errorf("entry %d (revision %d): kept %v, want %v", i, e.Revision, e.Kept, wantKept)
		}
	}
	if h, _ := st.History(c, 2); len(h) != 2 || h[0].Revision != revs[4] {
		t.Errorf("History(limit 2) = %+v", h)
	}

	old, err := st.Revision(c, revs[2])
	if err != nil {
		t.Fatalf("kept revision %d: %v", revs[2], err)
	}
	if w := old.Topology.Nodes[0].Servers[0].Weight; w != 102 || old.Revision != revs[2] {
		t.Errorf("revision %d read back with weight %d, revision %d", revs[2], w, old.Revision)
	}
	if _, err := st.Revision(c, revs[1]); !errors.Is(err, store.ErrNotKept) {
		t.Errorf("collected revision: %v, want ErrNotKept", err)
	}
	// A revision no topology was applied at says so, and which are kept.
	_, err = st.Revision(c, revs[4]+1000)
	wantKept := fmt.Sprintf("the kept revisions, newest first: %d, %d, %d", revs[4], revs[3], revs[2])
	if !errors.Is(err, store.ErrNoRevision) || errors.Is(err, store.ErrNotKept) || !strings.Contains(err.Error(), wantKept) {
		t.Errorf("unknown revision: %v, want ErrNoRevision listing %q", err, wantKept)
	}
}

// The pointer carries the signer's signature of its fields (province,
// sequence, time, digest, size, parts): another province's prefix, or
// another sequence, does not verify.
func TestApplySigns(t *testing.T) {
	st := etcdtest.Start(t).Store()
	c := ctx(t)
	key, _ := signing.Generate()
	s := signing.NewSigner(key)
	if _, err := st.Apply(c, fixture.Weighted(t, 100), store.ApplyOptions{Signer: s}); err != nil {
		t.Fatal(err)
	}
	cur, err := st.Current(c)
	if err != nil {
		t.Fatal(err)
	}
	v := signing.NewVerifier(s.Public())
	if err := v.VerifyPointer(cur.Signed(st.Prefix()), cur.KeyID, cur.Signature); err != nil || !cur.SignedPointer {
		t.Fatalf("stored signature (of the pointer: %v): %v", cur.SignedPointer, err)
	}
	other := cur.Signed("/another-province/")
	if err := v.VerifyPointer(other, cur.KeyID, cur.Signature); err == nil {
		t.Fatal("the signature verifies for another province")
	}
	replay := cur.Signed(st.Prefix())
	replay.Seq++
	if err := v.VerifyPointer(replay, cur.KeyID, cur.Signature); err == nil {
		t.Fatal("the signature verifies for another sequence")
	}
	// Unsigned when no signer is given.
	if _, err := st.Apply(c, fixture.Weighted(t, 101), store.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if cur, _ := st.Current(c); cur.KeyID != "" || len(cur.Signature) != 0 {
		t.Errorf("unsigned apply stored key id %q", cur.KeyID)
	}
}

// Expect refuses an apply when another one came after the caller judged
// the change (its diff and guard would be about an older revision).
func TestApplyExpect(t *testing.T) {
	st := etcdtest.Start(t).Store()
	c := ctx(t)
	r1, err := st.Apply(c, fixture.Weighted(t, 100), store.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := r1.Revision
	if _, err := st.Apply(c, fixture.Weighted(t, 101), store.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(c, fixture.Weighted(t, 102), store.ApplyOptions{Expect: &seen, Force: true}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("apply judged against an older revision: %v, want ErrConflict", err)
	}
}

// A signing key rotation re-signs the current document: the same digest
// under a new key is a new revision; under the same key, no change.
func TestApplyResignsWithANewKey(t *testing.T) {
	st := etcdtest.Start(t).Store()
	c := ctx(t)
	k1, _ := signing.Generate()
	k2, _ := signing.Generate()
	r1, err := st.Apply(c, fixture.Weighted(t, 100), store.ApplyOptions{Signer: signing.NewSigner(k1)})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := st.Apply(c, fixture.Weighted(t, 100), store.ApplyOptions{Signer: signing.NewSigner(k1)}); r.Changed {
		t.Fatal("the same document under the same key was applied again")
	}
	r2, err := st.Apply(c, fixture.Weighted(t, 100), store.ApplyOptions{Signer: signing.NewSigner(k2)})
	if err != nil || !r2.Changed || r2.Revision == r1.Revision {
		t.Fatalf("re-sign: %+v, %v", r2, err)
	}
	cur, _ := st.Current(c)
	if err := signing.NewVerifier(signing.NewSigner(k2).Public()).VerifyPointer(cur.Signed(st.Prefix()), cur.KeyID, cur.Signature); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
}

// A pointer that cannot be read loses its sequence, which readers rely on
// (they refuse one at or below the last they verified): an apply refuses
// to overwrite it, unless forced, and then numbers after the history.
func TestApplyRefusesAnUnreadablePointer(t *testing.T) {
	e := etcdtest.Start(t)
	st := e.Store()
	c := ctx(t)
	if _, err := st.Apply(c, fixture.Weighted(t, 100), store.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client().Put(c, st.CurrentKey(), "{not json"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(c, fixture.Weighted(t, 101), store.ApplyOptions{}); err == nil || !strings.Contains(err.Error(), "unreadable") {
		t.Fatalf("apply over an unreadable pointer: %v", err)
	}
	if _, err := st.Apply(c, fixture.Weighted(t, 102), store.ApplyOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if cur, err := st.Current(c); err != nil || cur.Seq != 2 {
		t.Fatalf("forced apply: seq %d, %v; want 2, after the history's 1", cur.Seq, err)
	}
}
