package adminapi

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/security/signing"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/anysched/anysched/internal/testbed/wait"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"github.com/prometheus/client_golang/prometheus"
)

// TestOperatorStateSigned: with apply.signing_key_file, the drains and the
// balance policy the admin API writes are signed with the center's key,
// so a scheduler that requires signatures (trusting that key) uses them.
func TestOperatorStateSigned(t *testing.T) {
	st := etcdtest.Start(t).Store()
	snap := fixture.CompileYAML(t, forecastProvince, 1)
	eng := steer.New(snap, steer.Options{})
	key, err := signing.Generate()
	if err != nil {
		t.Fatal(err)
	}
	sg := signing.NewSigner(key)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := &opstate.Watcher{Client: st.Client(), Prefix: st.Prefix(), Logger: quiet, Verifier: signing.NewVerifier(sg.Public()), RequireSigned: true}
	w.Register(prometheus.NewRegistry())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	wait.For(t, "first listing", wait.DefaultTimeout, w.Synced)

	svc := &Service{Store: st, Logger: quiet, Engine: func() *steer.Engine { return eng }, Drains: w.Drains, Apply: ApplyPolicy{Signer: sg, MaxRemovalShare: 0.5}} // one server of four is within the guard
	actx, _ := as(t, authz.Operator)
	if _, err := svc.Drain(actx, &pb.DrainRequest{Kind: "server", Name: "a", Reason: "disk"}); err != nil {
		t.Fatal(err)
	}
	actx, _ = as(t, authz.Operator)
	if _, err := svc.SetBalance(actx, &pb.SetBalanceRequest{Document: []byte("chash: {epsilon: 0.5}\n")}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the signed drain and balance policy in force at a scheduler requiring signatures", wait.DefaultTimeout, func() bool {
		c, err := w.Balance()
		i, _ := snap.Server("a")
		return err == nil && c.CHash.Epsilon == 0.5 && w.DrainReasons(snap)[i] != ""
	})
	// And the admin API shows the document as the operator wrote it.
	actx, _ = as(t, authz.Viewer)
	resp, err := svc.GetBalance(actx, &pb.GetBalanceRequest{})
	if err != nil || string(resp.GetDocument()) != "chash: {epsilon: 0.5}\n" {
		t.Fatalf("GetBalance document %q, %v", resp.GetDocument(), err)
	}
}
