package ctl

import (
	"regexp"
	"strings"
	"testing"
	"time"

	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// etcdLoss is a lab whose store fails reads from +0.5 s until back (never
// if back < 0), with two schedulers; the center answers explain probes
// (with revision 7) unless probesFail. restarted: wuhu-1 restarted at +1 s.
type etcdLoss struct {
	drill      *pb.DrillResponse
	back       time.Duration
	probesFail bool
	restarted  bool
}

func (l etcdLoss) rpc(now func() time.Time) map[string]handler {
	status := func(int, proto.Message) (proto.Message, error) {
		el := now().Sub(t0)
		if el >= 500*time.Millisecond && (l.back < 0 || el < l.back) {
			return fail(codes.Unavailable, "etcdserver: request timed out")(0, nil)
		}
		wuhu := &pb.Instance{Id: "wuhu-1", StartedAt: at(-3600), Announced: true}
		if l.restarted {
			wuhu.StartedAt = at(1)
		}
		hefei := &pb.Instance{Id: "hefei-1", StartedAt: at(-3600), AnnounceReason: "snapshot stale"}
		return &pb.StatusResponse{Revision: 7, Instances: []*pb.Instance{wuhu, hefei}}, nil
	}
	explain := reply(&pb.ExplainResponse{Revision: 7, Result: "MISS"})
	if l.probesFail {
		explain = fail(codes.Internal, "no snapshot")
	}
	return map[string]handler{"DrillEtcdLoss": reply(l.drill), "Status": status, "Explain": explain}
}

// maskTimes hides what depends on how the drill's two loops, the store's
// watch and the explain probes, interleave: the times of the events, and
// how many probes there were; whether all of them were answered stays.
func maskTimes(s string) string {
	s = regexp.MustCompile(`\+\s*\d+\.\ds`).ReplaceAllString(s, "+T")
	// The store's first failed read may be asked just after the members
	// were due back when the probes' sleeps move the shared clock on
	// meanwhile (a loaded machine): with the times masked the two lines
	// say the same in either order, so the outage's line goes first.
	const due, unreachable = "  +T  members due back (each restarts by itself)\n", "  +T  store unreachable (status: Unavailable)\n"
	if i, j := strings.Index(s, due), strings.Index(s, unreachable); i >= 0 && j == i+len(due) {
		s = s[:i] + unreachable + due + s[j+len(unreachable):]
	}
	s = regexp.MustCompile(`unreachable for \d+\.\ds`).ReplaceAllString(s, "unreachable for T")
	return regexp.MustCompile(`answered (\d+) of (\d+) explain`).ReplaceAllStringFunc(s, func(m string) string {
		n := regexp.MustCompile(`\d+`).FindAllString(m, 2)
		switch {
		case n[0] == n[1] && n[0] != "0":
			return "answered all of N explain"
		case n[0] == "0" && n[1] != "0":
			return "answered 0 of N explain"
		}
		return m
	})
}

func TestDrillEtcdLoss(t *testing.T) {
	lost := &pb.DrillResponse{Until: at(2), EtcdMembersStopped: []string{"etcd-1", "etcd-2"}, EtcdMembers: 3, EtcdLeader: "etcd-1"}
	kept := &pb.DrillResponse{Until: at(2), EtcdMembersStopped: []string{"etcd-3"}, EtcdMembers: 3, QuorumKept: true, EtcdLeader: "etcd-1"}
	embedded := &pb.DrillResponse{Until: at(2), EtcdMembersStopped: []string{"center"}, EtcdMembers: 1, EtcdLeader: "center"}
	started := func(req *pb.DrillEtcdLossRequest) []call { return []call{{method: "DrillEtcdLoss", req: req}} }
	header := func(what string) string {
		return "drill: stopped " + what + " until " + clockTime(2) + "; "
	}
	const (
		lostLine = "quorum lost: the store refuses reads and writes, schedulers answer from their snapshots\n"
		dueBack  = "  +T  members due back (each restarts by itself)\n"
		failed   = "schedctl drill: the schedulers did not all come through the etcd loss (see above)"
	)
	centerDown := header("1 of 1 etcd members (center)") + lostLine
	// report is what follows the watch: the store, the probes, the schedulers.
	report := func(store, probes, schedulers string) string {
		return "  " + store + "; the center answered " + probes + " while the members were down\n" +
			"  2 schedulers registered" + schedulers + "; not announcing: hefei-1 (snapshot stale)\n"
	}
	const allProbes = "all of N explain probes from its snapshot (revision 7)"
	twoSeconds := started(&pb.DrillEtcdLossRequest{DurationSeconds: 2})
	runCases(t, []cmdCase{
		{
			// The outage outlasts the drill by 2 s: the watch sees it
			// however the probes' sleeps fall between its own.
			name: "quorum lost", args: []string{"drill", "etcd-loss", "--members", "2", "--leader", "--duration", "2s"},
			rpcAt: etcdLoss{drill: lost, back: 4 * time.Second}.rpc, mask: maskTimes,
			want: header("2 of 3 etcd members (etcd-1 etcd-2; etcd-1 was the leader)") + lostLine +
				"  +T  store unreachable (status: Unavailable)\n" +
				dueBack +
				"  +T  store back\n" +
				report("the store was unreachable for T in 1 outage(s)", allProbes, ", none restarted during the drill") +
				"drill done: 2 of 3 members stopped for 2s, quorum lost; the schedulers kept answering from their snapshots (STB-side figures: the load generator, or bin/lab demo)\n",
			sent: append(started(&pb.DrillEtcdLossRequest{DurationSeconds: 2, Members: 2, LeaderFirst: true}),
				call{method: "Explain", req: &pb.ExplainRequest{ClientIp: "192.0.2.1", Host: "etcd-loss-drill.invalid"}}), sentMore: true,
		},
		{
			name: "quorum kept", args: []string{"drill", "etcd-loss", "--members", "1", "--duration", "2s"},
			rpcAt: etcdLoss{drill: kept, back: 500 * time.Millisecond}.rpc, mask: maskTimes,
			want: header("1 of 3 etcd members (etcd-3)") + "quorum kept (2 of 3 run): the store keeps serving\n" +
				dueBack +
				report("the store answered throughout", allProbes, ", none restarted during the drill") +
				"drill done: 1 of 3 members stopped for 2s, quorum kept; the schedulers kept answering from their snapshots (STB-side figures: the load generator, or bin/lab demo)\n",
			sent: started(&pb.DrillEtcdLossRequest{DurationSeconds: 2, Members: 1}), sentMore: true,
		},
		{
			name: "a scheduler restarted", args: []string{"drill", "etcd-loss", "--duration", "2s"},
			rpcAt: etcdLoss{drill: embedded, back: 500 * time.Millisecond, restarted: true}.rpc, mask: maskTimes,
			want: centerDown +
				dueBack +
				report("the store answered throughout", allProbes, "; restarted during the drill: wuhu-1"),
			wantErr: failed,
			sent:    twoSeconds, sentMore: true,
		},
		{
			name: "the center stopped deciding", args: []string{"drill", "etcd-loss", "--duration", "2s"},
			rpcAt: etcdLoss{drill: embedded, back: 500 * time.Millisecond, probesFail: true}.rpc, mask: maskTimes,
			want: centerDown +
				dueBack +
				report("the store answered throughout", "0 of N explain probes from its snapshot (revision 0)", ", none restarted during the drill"),
			wantErr: failed,
			sent:    twoSeconds, sentMore: true,
		},
		{
			name: "the store never came back", args: []string{"drill", "etcd-loss", "--duration", "2s"},
			rpcAt: etcdLoss{drill: embedded, back: -1}.rpc, mask: maskTimes,
			want: centerDown +
				"  +T  store unreachable (status: Unavailable)\n" +
				dueBack,
			wantErr: "schedctl drill: the store did not come back within 2 minutes of the drill's end",
			sent:    twoSeconds, sentMore: true,
		},
		{
			name: "not a lab", args: []string{"drill", "etcd-loss"},
			rpc:     map[string]handler{"DrillEtcdLoss": fail(codes.FailedPrecondition, "etcd-loss drills run only in a lab (lab: true)")},
			wantErr: "schedctl drill: etcd-loss drills run only in a lab (lab: true)",
			sent:    started(&pb.DrillEtcdLossRequest{DurationSeconds: 10}),
		},
		{name: "negative members", args: []string{"drill", "etcd-loss", "--members", "-1"}, wantErr: `schedctl drill: invalid value "-1" for flag -members: parse error`, usage: true},
		{name: "argument", args: []string{"drill", "etcd-loss", "etcd-1"}, wantErr: `schedctl drill: unexpected argument "etcd-1"`, usage: true},
	})
}
