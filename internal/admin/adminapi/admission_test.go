package adminapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/heapuse"
	"github.com/anysched/anysched/internal/wiring/config"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// openCall starts a call of method as a client stream that sends its
// headers and no message: what a caller uploading a large request slowly
// looks like to the server until the message is complete.
func openCall(t *testing.T, ctx context.Context, p *province, name, method string) grpc.ClientStream {
	t.Helper()
	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(credentials.NewTLS(mustTLS(t, p.certs, name))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, method)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestRoleCheckedBeforeTheBody: a caller whose role does not allow a
// method is refused on the call's headers, before the server reads any of
// its message (here: before the message is even sent), and the refusal is
// audited as before.
func TestRoleCheckedBeforeTheBody(t *testing.T) {
	p := newProvince(t, true)
	for _, c := range []struct{ who, method, want string }{
		{"vera", pb.Admin_ApplyTopology_FullMethodName, "ApplyTopology needs the operator role"},
		{"vera", pb.Admin_SetBalance_FullMethodName, "SetBalance needs the operator role"},
		{"nobody", pb.Admin_DiffTopology_FullMethodName, "no anysched role"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cs := openCall(t, ctx, p, c.who, c.method)
		// No message sent: a server that reads the message before the
		// role check waits for it until the deadline.
		err := cs.RecvMsg(new(pb.ApplyTopologyResponse))
		cancel()
		wantCode(t, c.who+" "+c.method+" without a message", err, codes.PermissionDenied, c.want)
	}
	got, err := p.client["vera"].Audit(context.Background(), &pb.AuditRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range got.GetEntries() {
		lines = append(lines, e.GetIdentity()+" "+e.GetMethod()+" "+e.GetCode())
	}
	for _, w := range []string{"vera /anysched.v1.Admin/ApplyTopology PermissionDenied", "vera /anysched.v1.Admin/SetBalance PermissionDenied", "nobody /anysched.v1.Admin/DiffTopology PermissionDenied"} {
		if !strings.Contains(strings.Join(lines, "\n"), w) {
			t.Errorf("audit lacks %q:\n%s", w, strings.Join(lines, "\n"))
		}
	}
}

// TestDocumentCallsBounded: at most maxDocumentCalls calls carrying a
// document are received at once, server-wide, whoever makes them and over
// however many connections; the next is refused with ResourceExhausted
// before its message is read, and a slot frees when its call ends.
func TestDocumentCallsBounded(t *testing.T) {
	p := newProvince(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Slow uploads: admitted, waiting for their messages.
	var open []context.CancelFunc
	for i := range maxDocumentCalls {
		cctx, ccancel := context.WithCancel(ctx)
		open = append(open, ccancel)
		methods := []string{pb.Admin_ApplyTopology_FullMethodName, pb.Admin_DiffTopology_FullMethodName}
		openCall(t, cctx, p, "otto", methods[i%len(methods)])
	}
	apply := func() error {
		_, err := p.client["otto"].ApplyTopology(ctx, &pb.ApplyTopologyRequest{Document: []byte("not: a topology"), DryRun: true})
		return err
	}
	// The slow uploads' headers reach the server asynchronously: poll.
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err = apply(); status.Code(err) == codes.ResourceExhausted {
			break
		}
	}
	wantCode(t, fmt.Sprintf("an apply beside %d slow uploads", maxDocumentCalls), err, codes.ResourceExhausted, "calls carrying a document")
	// A read without a document is not held up.
	if _, err := p.client["vera"].WhoAmI(ctx, &pb.WhoAmIRequest{}); err != nil {
		t.Errorf("whoami beside the slow uploads: %v", err)
	}
	// One upload given up: its slot is free again.
	open[0]()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err = apply(); status.Code(err) != codes.ResourceExhausted {
			break
		}
	}
	wantCode(t, "an apply once an upload ended", err, codes.InvalidArgument)
	for _, c := range open[1:] {
		c()
	}
}

// TestConcurrentDocumentsHeap: many large balance documents sent at once
// are not all held at once: the server holds at most maxDocumentCalls of
// them (each blocked here in the handler, as a slow apply would be), the
// rest are refused unread.
func TestConcurrentDocumentsHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 24 documents of 1 MiB")
	}
	const calls, size = 24, 1 << 20
	p := newProvince(t, true)
	// A server with room for the documents.
	eng := p.svc.Engine()
	release := make(chan struct{})
	var blocked atomic.Int32
	p.svc.Engine = func() *steer.Engine {
		blocked.Add(1)
		<-release
		return eng
	}
	addr := serve(t, config.GRPC{TLS: config.ServerTLS{CertFile: p.certs.serverCert, KeyFile: p.certs.serverKey, ClientCAFile: p.certs.ca}, MaxRequestBytes: 2 * size}, p.svc, discard())
	cli := dialTLS(t, addr, p.certs.ca, p.certs.clients["otto"][0], p.certs.clients["otto"][1])
	server := eng.Snapshot().Servers[0].Name

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var refused atomic.Int32
	errs := make(chan error, calls)
	defer func() { close(release); wg.Wait() }()
	u := heapuse.MeasureLive(func() {
		for i := range calls {
			// Each document its own, as each caller's would be.
			doc := append([]byte(fmt.Sprintf("weights: {%s: %d}\n#", server, i+1)), bytes.Repeat([]byte("x"), size)...)
			doc = append(doc, '\n')
			before := blocked.Load() + refused.Load()
			wg.Add(1)
			go func(doc []byte) {
				defer wg.Done()
				_, err := cli.SetBalance(ctx, &pb.SetBalanceRequest{Document: doc, DryRun: true})
				if status.Code(err) == codes.ResourceExhausted {
					refused.Add(1)
					return
				}
				if err != nil {
					errs <- err
				}
			}(doc)
			// One call at a time reaches the server: the peak is what the
			// server holds, not the client's copies in flight.
			for deadline := time.Now().Add(20 * time.Second); blocked.Load()+refused.Load() == before; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("call %d neither reached the handler nor was refused", i)
				}
			}
		}
	})
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	t.Logf("%d documents of %.0f MiB at once: %d held by the server, %d refused; peak heap %.1f MiB (%.1fx a document)",
		calls, heapuse.MB(size), blocked.Load(), refused.Load(), heapuse.MB(u.Peak), heapuse.Ratio(u.Peak, size))
	if n := blocked.Load(); n > maxDocumentCalls {
		t.Errorf("%d documents held at once, want at most %d", n, maxDocumentCalls)
	}
	// Holding all 24 took 30x a document (before the admin API bounded
	// them); the two held and the call being sent take 7x to 12x, the
	// refused calls' documents are not in the heap.
	if limit := 16.0; heapuse.Ratio(u.Peak, size) > limit {
		t.Errorf("peak heap %.1fx a document, more than %.0fx", heapuse.Ratio(u.Peak, size), limit)
	}
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
