package adminapi

import (
	"context"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/province/audit"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// Memory of the admin API. gRPC reads and decodes a
// call's message before any interceptor runs, so the role check and the
// bound on large requests run on the call's headers instead, in the tap
// handle: a call refused there has none of its message read.

// maxStreamsPerConn bounds one connection's calls in progress: each may
// receive a message of grpc.max_request_bytes. schedctl makes one call at
// a time; the console none (it calls in process).
const maxStreamsPerConn = 16

// maxDocumentCalls bounds the calls carrying a document (up to
// grpc.max_request_bytes each, and about ten times that while an apply is
// decoded: memory_test.go) that are received and handled at once, whoever
// makes them and over however many connections. Operators apply one at a
// time; more at once are refused with ResourceExhausted, to retry.
const maxDocumentCalls = 2

// documentMethod reports whether method's request carries a document.
func documentMethod(method string) bool {
	switch method {
	case pb.Admin_ApplyTopology_FullMethodName, pb.Admin_SetBalance_FullMethodName, pb.Admin_DiffTopology_FullMethodName,
		pb.Admin_Restore_FullMethodName: // a backup: a province's documents and more
		return true
	}
	return false
}

// tap runs on a call's headers, before gRPC reads its message, on the
// connection's reading goroutine (grpc.InTapHandle): it refuses a caller
// the role table refuses, and a document call beyond maxDocumentCalls. Its
// context carries the peer with the TLS state of the handshake (grpc's
// serveStreams puts it there before the transport reads a stream).
func (g *guard) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	start := time.Now()
	c := g.identify(ctx)
	if err := g.authorize(info.FullMethodName, c); err != nil {
		// Recorded before the refusal leaves, as the interceptor records
		// its calls. Writing the record holds up this connection's reading
		// only: the refused caller's own.
		actx, note := audit.WithNote(ctx)
		g.record(actx, info.FullMethodName, c, note, err, start)
		return ctx, err
	}
	if g.docs == nil || !documentMethod(info.FullMethodName) {
		return ctx, nil
	}
	ctx, ok := g.docs.admit(ctx)
	if !ok {
		g.log.Warn("admin call refused: too many documents at once", "method", info.FullMethodName, "identity", c.Identity, "peer", c.Peer, "limit", g.docs.limit)
		return ctx, status.Errorf(codes.ResourceExhausted, "%s: %d calls carrying a document are in progress on this center, the most it receives at once; retry", info.FullMethodName, g.docs.limit)
	}
	return ctx, nil
}

// admission counts the document calls in progress. A call admitted by the
// tap holds its slot until gRPC reports its end (stats.End, which gRPC
// reports for every call of a registered method, also when its message
// never arrives), not until its stream's context ends: a caller who hangs
// up does not end the handler still holding the decoded document.
type admission struct {
	limit int
	mu    sync.Mutex
	n     int
}

func newAdmission(limit int) *admission { return &admission{limit: limit} }

type slotKey struct{}

// slot is one admitted call's; released once.
type slot struct {
	once sync.Once
	a    *admission
}

func (s *slot) release() {
	s.once.Do(func() {
		s.a.mu.Lock()
		s.a.n--
		s.a.mu.Unlock()
	})
}

func (a *admission) admit(ctx context.Context) (context.Context, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n >= a.limit {
		return ctx, false
	}
	a.n++
	return context.WithValue(ctx, slotKey{}, &slot{a: a}), true
}

// The stats.Handler methods: the end of a call releases its slot.

func (a *admission) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (a *admission) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.End); !ok {
		return
	}
	if sl, ok := ctx.Value(slotKey{}).(*slot); ok {
		sl.release()
	}
}

func (a *admission) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (a *admission) HandleConn(context.Context, stats.ConnStats) {}
