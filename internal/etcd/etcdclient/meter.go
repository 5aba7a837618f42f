package etcdclient

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/prometheus/client_golang/prometheus"
)

// KindLease is the kind WriteMeter counts lease requests under (grants,
// revocations, keep-alives): they name no key of the layout.
const KindLease = "lease"

// WriteTotals is what a WriteMeter counted for one kind.
type WriteTotals struct {
	// Bytes of the write requests sent (protobuf size, each attempt of a
	// retried request counted), Writes the requests.
	Bytes, Writes uint64
	// Keys put or deleted, and Revisions (write requests etcd applied as
	// a new revision: a put, a transaction whose executed branch wrote, a
	// delete that found keys), from etcd's answers.
	Keys, Revisions uint64
}

// WriteMeter counts what one etcd client writes, by the keyspace concept
// of the keys (keyspace.Concept), so that an operator can tell which
// writer fills the database: every put, delete and writing transaction,
// and lease grants, revocations and keep-alives. Reads and watches are not
// counted. It sits in the client's gRPC interceptors (DialOptions), below
// clientv3's retries, so it sees every request sent, whoever made it.
type WriteMeter struct {
	prefix string
	kinds  []string       // keyspace.ConceptNames and KindLease
	index  map[string]int // kind -> its counters; never written after NewWriteMeter
	counts []kindCounts
	descs  [4]*prometheus.Desc
}

type kindCounts struct{ bytes, writes, keys, revisions atomic.Uint64 }

// NewWriteMeter returns a meter of a client whose keys sit under prefix
// (etcd.prefix); register it (a prometheus.Collector) on the daemon's
// registry and hand it to Connect.
func NewWriteMeter(prefix string) *WriteMeter {
	m := &WriteMeter{prefix: prefix, kinds: append(keyspace.ConceptNames(), KindLease), index: map[string]int{}}
	for i, k := range m.kinds {
		m.index[k] = i
	}
	m.counts = make([]kindCounts, len(m.kinds))
	kind := []string{"kind"}
	m.descs = [4]*prometheus.Desc{
		prometheus.NewDesc("anysched_etcd_client_write_bytes_total", "Bytes of the write requests this daemon sent to etcd, by the keyspace concept of their keys (lease: lease grants, revocations, keep-alives).", kind, nil),
		prometheus.NewDesc("anysched_etcd_client_writes_total", "Write requests this daemon sent to etcd (puts, deletes, writing transactions, lease requests), by keyspace concept.", kind, nil),
		prometheus.NewDesc("anysched_etcd_client_write_keys_total", "Keys this daemon's requests put or deleted in etcd, by keyspace concept.", kind, nil),
		prometheus.NewDesc("anysched_etcd_client_write_revisions_total", "Write requests of this daemon that etcd applied as a new revision, by keyspace concept: what its history grows by.", kind, nil),
	}
	return m
}

// Describe implements prometheus.Collector.
func (m *WriteMeter) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range m.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: every kind, zero or not, so
// that a rate has a series from the start.
func (m *WriteMeter) Collect(ch chan<- prometheus.Metric) {
	for i, k := range m.kinds {
		c := &m.counts[i]
		for j, v := range [4]uint64{c.bytes.Load(), c.writes.Load(), c.keys.Load(), c.revisions.Load()} {
			ch <- prometheus.MustNewConstMetric(m.descs[j], prometheus.CounterValue, float64(v), k)
		}
	}
}

// Totals returns what was counted so far, by kind.
func (m *WriteMeter) Totals() map[string]WriteTotals {
	out := make(map[string]WriteTotals, len(m.kinds))
	for i, k := range m.kinds {
		c := &m.counts[i]
		out[k] = WriteTotals{Bytes: c.bytes.Load(), Writes: c.writes.Load(), Keys: c.keys.Load(), Revisions: c.revisions.Load()}
	}
	return out
}

// DialOptions are the interceptors that count; Connect adds them, and a
// client made otherwise (a bench's) passes them in clientv3.Config.
func (m *WriteMeter) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(m.unary), grpc.WithChainStreamInterceptor(m.stream)}
}

func (m *WriteMeter) kind(key []byte) int {
	k := string(key)
	if !strings.HasPrefix(k, m.prefix) {
		return m.index[keyspace.ConceptOther]
	}
	return m.index[keyspace.Concept(k[len(m.prefix):])]
}

func (m *WriteMeter) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	ok := err == nil
	switch r := req.(type) {
	case *pb.PutRequest:
		c := &m.counts[m.kind(r.Key)]
		c.bytes.Add(uint64(proto.Size(r)))
		c.writes.Add(1)
		if ok {
			c.keys.Add(1)
			c.revisions.Add(1)
		}
	case *pb.DeleteRangeRequest:
		c := &m.counts[m.kind(r.Key)]
		c.bytes.Add(uint64(proto.Size(r)))
		c.writes.Add(1)
		if resp, _ := reply.(*pb.DeleteRangeResponse); ok && resp != nil && resp.Deleted > 0 {
			c.keys.Add(uint64(resp.Deleted))
			c.revisions.Add(1)
		}
	case *pb.TxnRequest:
		resp, _ := reply.(*pb.TxnResponse)
		if !ok {
			resp = nil
		}
		m.txn(r, resp)
	case *pb.LeaseGrantRequest, *pb.LeaseRevokeRequest:
		c := &m.counts[m.index[KindLease]]
		c.bytes.Add(uint64(proto.Size(req.(proto.Message))))
		c.writes.Add(1)
	}
	return err
}

// txn counts a transaction that writes: each write op's bytes under its
// key's kind, the compares and reads under the first write's; one request
// per kind written; keys and the revision from the branch etcd executed
// (resp nil: unknown, none counted). A transaction that only reads is not
// counted.
func (m *WriteMeter) txn(r *pb.TxnRequest, resp *pb.TxnResponse) {
	first := -1
	var bytes = map[int]uint64{}
	var other uint64
	var walk func(ops []*pb.RequestOp)
	walk = func(ops []*pb.RequestOp) {
		for _, op := range ops {
			k := -1
			switch o := op.Request.(type) {
			case *pb.RequestOp_RequestPut:
				k = m.kind(o.RequestPut.Key)
			case *pb.RequestOp_RequestDeleteRange:
				k = m.kind(o.RequestDeleteRange.Key)
			case *pb.RequestOp_RequestTxn:
				walk(o.RequestTxn.Success)
				walk(o.RequestTxn.Failure)
				continue
			}
			if k < 0 {
				other += uint64(proto.Size(op))
				continue
			}
			if first < 0 {
				first = k
			}
			bytes[k] += uint64(proto.Size(op))
		}
	}
	walk(r.Success)
	walk(r.Failure)
	if first < 0 {
		return
	}
	for _, c := range r.Compare {
		other += uint64(proto.Size(c))
	}
	bytes[first] += other
	for k, b := range bytes {
		m.counts[k].bytes.Add(b)
		m.counts[k].writes.Add(1)
	}
	if resp == nil {
		return
	}
	ops := r.Failure
	if resp.Succeeded {
		ops = r.Success
	}
	if k := m.executed(ops, resp.Responses); k >= 0 {
		m.counts[k].revisions.Add(1)
	}
}

// executed counts the keys of the ops of the branch etcd ran, with their
// responses (nested transactions included), and returns the kind of the
// first that wrote (-1: none did, so no revision).
func (m *WriteMeter) executed(ops []*pb.RequestOp, resps []*pb.ResponseOp) int {
	first := -1
	for i, op := range ops {
		var resp *pb.ResponseOp
		if i < len(resps) {
			resp = resps[i]
		}
		k := -1
		switch o := op.Request.(type) {
		case *pb.RequestOp_RequestPut:
			k = m.kind(o.RequestPut.Key)
			m.counts[k].keys.Add(1)
		case *pb.RequestOp_RequestDeleteRange:
			if n := resp.GetResponseDeleteRange().GetDeleted(); n > 0 {
				k = m.kind(o.RequestDeleteRange.Key)
				m.counts[k].keys.Add(uint64(n))
			}
		case *pb.RequestOp_RequestTxn:
			inner := resp.GetResponseTxn()
			branch := o.RequestTxn.Failure
			if inner.GetSucceeded() {
				branch = o.RequestTxn.Success
			}
			k = m.executed(branch, inner.GetResponses())
		}
		if first < 0 {
			first = k
		}
	}
	return first
}

func (m *WriteMeter) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != "/etcdserverpb.Lease/LeaseKeepAlive" {
		return s, err
	}
	return &keepAliveStream{ClientStream: s, c: &m.counts[m.index[KindLease]]}, nil
}

// keepAliveStream counts the keep-alives sent on a lease stream.
type keepAliveStream struct {
	grpc.ClientStream
	c *kindCounts
}

func (s *keepAliveStream) SendMsg(msg any) error {
	if r, ok := msg.(*pb.LeaseKeepAliveRequest); ok {
		s.c.bytes.Add(uint64(proto.Size(r)))
		s.c.writes.Add(1)
	}
	return s.ClientStream.SendMsg(msg)
}
