package store_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/anysched/anysched/internal/testbed/wait"
)

// The magic names the format StateFormat says.
func TestStateMagicIsStateFormat(t *testing.T) {
	if got := int(StateMagic[len(StateMagic)-1] - '0'); got != StateFormat {
		t.Fatalf("the plan state's magic %q says format %d, StateFormat is %d", StateMagic, got, StateFormat)
	}
}

// newerRefused checks that err refuses a document of format f as newer.
func newerRefused(t *testing.T, what string, err error, f int) {
	t.Helper()
	var nf *NewerFormatError
	if !errors.As(err, &nf) || nf.Format != f {
		t.Fatalf("%s: %v, want a refusal of format %d as newer", what, err, f)
	}
	t.Logf("%s: %v", what, err)
}

// Claims of a newer format are refused whole, by every reader: a planner
// reading its peers (which then plans as without etcd, not on capacity
// it cannot account for), the totals, and the watch; claims without a
// format, or of this one, read as before.
func TestClaimsOfANewerFormatRefused(t *testing.T) {
	e := etcdtest.Start(t)
	ctx := context.Background()
	cli, s := e.Client(), e.Store()
	me := &ClaimBoard{Store: s, Region: "hefei", Instance: "hefei-1", TTL: 5 * time.Second}
	peerKey := e.Prefix + "alloc/claims/hefei/hefei-2"
	watched := make(chan *Claims, 8)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_ = me.Watch(wctx, func(_ string, c *Claims) { watched <- c })
	}()
	// The watch is up once it passes a put on.
	wait.For(t, "the claims watch", 10*time.Second, func() bool {
		if _, err := cli.Put(ctx, peerKey, `{"rank":9}`); err != nil {
			t.Fatal(err)
		}
		select {
		case <-watched:
			return true
		case <-time.After(100 * time.Millisecond):
			return false
		}
	})
	for len(watched) > 0 {
		<-watched
	}
	for _, v := range []string{
		`{"sessions":3,"servers":{"hf-a":{"bandwidth_kbps":1000,"compute":1}},"rank":1}`,
		`{"sessions":3,"servers":{"hf-a":{"bandwidth_kbps":1000,"compute":1}},"rank":1,"format":1}`,
	} {
		if _, err := cli.Put(ctx, peerKey, v); err != nil {
			t.Fatal(err)
		}
		peers, _, err := me.Peers(ctx)
		if err != nil || peers["hefei-2"].Servers["hf-a"].BandwidthKbps != 1000 {
			t.Fatalf("claims %s: %v %v", v, peers, err)
		}
	}
	newer := `{"sessions":3,"servers":{"hf-a":{"bandwidth_kbps":1000,"compute":1}},"rank":1,"format":2,"units":"mbps"}`
	if _, err := cli.Put(ctx, peerKey, newer); err != nil {
		t.Fatal(err)
	}
	peers, _, err := me.Peers(ctx)
	if peers != nil {
		t.Errorf("peers read beside a refusal: %v", peers)
	}
	newerRefused(t, "peers", err, 2)
	n, total, err := me.Totals(ctx)
	if n != 0 || total != nil {
		t.Errorf("totals beside a refusal: %d %v", n, total)
	}
	newerRefused(t, "totals", err, 2)
	// The watch passed the two readable values on, not the newer one.
	var seen []int
	deadline := time.After(10 * time.Second)
	for len(seen) < 2 {
		select {
		case c := <-watched:
			seen = append(seen, c.Format)
		case <-deadline:
			t.Fatalf("the watch passed on %v, want the two readable claims", seen)
		}
	}
	if _, err := cli.Put(ctx, peerKey, `{"rank":1}`); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-watched:
		if c.Format != 0 || c.Servers != nil {
			t.Fatalf("the watch passed on %+v after the newer claims, want the next readable ones", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch passed nothing on after the newer claims")
	}
}

// A plan state of a newer format, whether its head sits where this
// build's does or its values under keys this build does not know, is
// refused whole: AllocState returns no state, and the refusal says why.
func TestPlanStateOfANewerFormatRefused(t *testing.T) {
	e := etcdtest.Start(t)
	ctx := context.Background()
	cli, s := e.Client(), e.Store()
	sim := newSim(3, 50)
	sim.st.Instance = "hefei-1"
	if err := s.PutAllocState(ctx, "hefei", sim.st); err != nil {
		t.Fatal(err)
	}
	if got, err := s.AllocState(ctx, "hefei", ""); err != nil || got == nil {
		t.Fatalf("this format: %v %v", got, err)
	}
	next := []byte(StateMagic[:len(StateMagic)-1] + "3h")
	next = append(next, UnsealState(SealState('h', []byte("whatever a later release writes")))...)
	for _, key := range []string{"hefei-2/h", "hefei-3/x/0"} {
		inst := key[:len("hefei-2")]
		k := e.Prefix + "alloc/state/hefei/" + key
		if _, err := cli.Put(ctx, k, string(next)); err != nil {
			t.Fatal(err)
		}
		got, err := s.AllocState(ctx, "hefei", "")
		if got != nil {
			t.Errorf("%s: a state read beside the refusal: %s", key, got.Instance)
		}
		newerRefused(t, key, err, 3)
		// Passed over (its own instance's), the rest reads as before.
		if got, err := s.AllocState(ctx, "hefei", inst); err != nil || got == nil || got.Instance != "hefei-1" {
			t.Fatalf("except %s: %v %v", inst, got, err)
		}
		if _, err := cli.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.AllocState(ctx, "hefei", ""); err != nil || got == nil || got.Instance != "hefei-1" {
		t.Fatalf("after the newer states went: %v %v", got, err)
	}
}

// A stored topology with a field this build does not know (a newer
// release's) is refused whole, as corrupt, and the error says it may be
// a newer release's field.
func TestStoredTopologyWithUnknownFieldRefused(t *testing.T) {
	e := etcdtest.Start(t)
	ctx := context.Background()
	cli, s := e.Client(), e.Store()
	if _, err := s.Apply(ctx, fixture.Weighted(t, 100), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	cur, err := s.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The document as a newer release's apply might store it.
	var doc map[string]any
	if err := json.Unmarshal(cur.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	doc["admission_control"] = map[string]any{"enabled": true}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(data)
	_ = zw.Close()
	if _, err := cli.Put(ctx, fmt.Sprintf("%stopology/blobs/%s/%06d", s.Prefix(), digest, 0), gz.String()); err != nil {
		t.Fatal(err)
	}
	ptr, err := cli.Get(ctx, s.CurrentKey())
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(ptr.Kvs[0].Value, &p); err != nil {
		t.Fatal(err)
	}
	p["digest"], p["chunks"], p["size"] = digest, 1, len(data)
	pv, _ := json.Marshal(p)
	if _, err := cli.Put(ctx, s.CurrentKey(), string(pv)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Current(ctx)
	if got != nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `unknown field "admission_control"`) || !strings.Contains(err.Error(), "newer release") {
		t.Fatalf("a topology with a newer release's field: %v, %v", got, err)
	}
	t.Log(err)
}
