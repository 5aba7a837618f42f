package allocator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestNewerFormatsRefusedAndCounted: a peer's claims in a format newer
// than this build's put the planner in safe mode (as without etcd: not
// planning on capacity it cannot account for), and a plan state in a
// newer format is not adopted (the planner keeps its own sessions); each
// refusal is counted under its document.
func TestNewerFormatsRefusedAndCounted(t *testing.T) {
	e := etcdtest.Start(t)
	eng := engine(t)
	ctx := context.Background()
	r := newRig(t, e, eng, "hefei-1", Config{States: e.Store()})
	for i := range 2 {
		r.get(fmt.Sprintf("100.64.1.%d", i+1), "live.iptv.example", fmt.Sprintf("/ch%d/index.m3u8?token=%s", i, signed(t, fmt.Sprintf("u%d", i), 5000)), "")
	}
	r.a.Solve(ctx)
	if st := r.a.Status(); st.SafeMode || st.PlannedN != 2 {
		t.Fatalf("before: %+v", st)
	}

	if _, err := e.Client().Put(ctx, e.Prefix+"alloc/state/hefei/hefei-2/h", "AS3h a later release's head"); err != nil {
		t.Fatal(err)
	}
	r.a.adoptState(ctx, eng.Snapshot(), time.Now(), true)
	if got := testutil.ToFloat64(r.a.met.newerState); got != 1 {
		t.Errorf("plan state refusals counted: %v, want 1", got)
	}
	if got := r.a.Status().Sessions; got != 2 {
		t.Errorf("sessions after the refused state: %d, want this instance's 2", got)
	}

	if _, err := e.Client().Put(ctx, e.Prefix+"alloc/claims/hefei/hefei-2", `{"format":2,"servers":{"a":{"bandwidth_kbps":1}},"rank":1}`); err != nil {
		t.Fatal(err)
	}
	r.a.Solve(ctx)
	if st := r.a.Status(); !st.SafeMode {
		t.Errorf("a peer's newer claims: %+v, want safe mode", st)
	}
	if got := testutil.ToFloat64(r.a.met.newerClaims); got != 1 {
		t.Errorf("claims refusals counted: %v, want 1", got)
	}
}
