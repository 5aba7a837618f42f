package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/status"
)

// etcdLossCmd stops the lab's etcd (the center's embedded one, or members of
// the lab's cluster) for a while and follows the drill: whether the store
// answers (a quorum), whether the center keeps deciding from its snapshot
// meanwhile, and whether every scheduler came through without a restart.
func etcdLossCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("drill etcd-loss", flag.ContinueOnError)
	dur := fs.Duration("duration", 10*time.Second, "how long the members stay down")
	members := fs.Uint("members", 0, "how many members of the lab's etcd cluster to stop (0: all)")
	leader := fs.Bool("leader", false, "stop the cluster's current leader first (then the next members, up to --members)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	start := e.clock.Now()
	resp, err := e.admin.DrillEtcdLoss(ctx, &pb.DrillEtcdLossRequest{DurationSeconds: dur.Seconds(), Members: uint32(*members), LeaderFirst: *leader})
	if err != nil {
		return err
	}
	until := resp.GetUntil().AsTime()
	stopped, total := resp.GetEtcdMembersStopped(), resp.GetEtcdMembers()
	quorum := "quorum lost: the store refuses reads and writes, schedulers answer from their snapshots"
	if resp.GetQuorumKept() {
		quorum = fmt.Sprintf("quorum kept (%d of %d run): the store keeps serving", int(total)-len(stopped), total)
	}
	names := strings.Join(stopped, " ")
	if slices.Contains(stopped, resp.GetEtcdLeader()) && total > 1 {
		names += "; " + resp.GetEtcdLeader() + " was the leader"
	}
	fmt.Fprintf(e.out, "drill: stopped %d of %d etcd members (%s) until %s; %s\n", len(stopped), total, names, until.Local().Format(time.TimeOnly), quorum)

	// The probes run beside the store's watch: a read that hangs for its
	// whole second while the store is down must not space them out. The
	// first is made before, so that there is one at least.
	var p probes
	p.probe(ctx, e)
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		for e.clock.Sleep(ctx, pollEvery) == nil && e.clock.Now().Before(until) {
			p.probe(ctx, e)
		}
	}()
	w := storeWatch{start: start, until: until, out: e.out}
	err = w.run(ctx, e)
	<-probed
	if err != nil {
		return err
	}

	// The schedulers: none restarted during the drill, and which announce.
	st, err := e.admin.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "  %s; the center answered %d of %d explain probes from its snapshot (revision %d) while the members were down\n", w.summary(), p.answered, p.sent, p.revision)
	line, restarted := schedulers(st, start)
	fmt.Fprintln(e.out, line)
	if p.answered < p.sent || restarted {
		return errors.New("the schedulers did not all come through the etcd loss (see above)")
	}
	fmt.Fprintf(e.out, "drill done: %d of %d members stopped for %s, quorum %s; the schedulers kept answering from their snapshots (STB-side figures: the load generator, or bin/lab demo)\n",
		len(stopped), total, dur, map[bool]string{true: "kept", false: "lost"}[resp.GetQuorumKept()])
	return nil
}

// probes asks the center for a decision every 250 ms until the members are
// due back: explain answers from memory only, never from the store.
type probes struct {
	sent, answered int
	revision       int64 // of the last answer
}

func (p *probes) probe(ctx context.Context, e *env) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	x, err := e.admin.Explain(ctx, &pb.ExplainRequest{ClientIp: "192.0.2.1", Host: "etcd-loss-drill.invalid"})
	p.sent++
	if err == nil {
		p.answered++
		p.revision = x.GetRevision()
	}
}

// storeWatch reads through the store (a Status call is a linearizable
// read) every 250 ms and reports when it stops and starts answering.
type storeWatch struct {
	start, until time.Time
	out          io.Writer
	saidDue      bool // "members due back" is printed
	down         bool
	downAt       time.Duration // since start, of the outage going on
	downFor      time.Duration // of the outages over
	outages      int
}

// run watches until the members are due back, the store answers, and a
// second has passed for it to settle; or 2 minutes after they were due.
func (w *storeWatch) run(ctx context.Context, e *env) error {
	deadline := w.until.Add(2 * time.Minute)
	for {
		if e.clock.Now().After(deadline) {
			return errors.New("the store did not come back within 2 minutes of the drill's end")
		}
		asked := since(e.clock, w.start)
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := e.admin.Status(pctx, &pb.StatusRequest{})
		cancel()
		switch {
		case err != nil && !w.down:
			w.down, w.downAt = true, asked // the read that failed was asked then
			w.outages++
			w.dueBy(w.downAt)
			fmt.Fprintf(w.out, "  +%5.1fs  store unreachable (status: %s)\n", w.downAt.Seconds(), status.Code(err))
		case err == nil && w.down:
			w.down = false
			back := since(e.clock, w.start)
			w.downFor += back - w.downAt
			w.dueBy(back)
			fmt.Fprintf(w.out, "  +%5.1fs  store back\n", back.Seconds())
		}
		w.dueBy(since(e.clock, w.start))
		if w.saidDue && !w.down && e.clock.Now().After(w.until.Add(time.Second)) {
			return nil
		}
		if err := e.clock.Sleep(ctx, pollEvery); err != nil {
			return err
		}
	}
}

// dueBy prints "members due back" once the drill's end is before at, so
// that the lines stay in time order: a read asked before the end may fail
// (and be printed at the time it was asked) after it.
func (w *storeWatch) dueBy(at time.Duration) {
	if due := w.until.Sub(w.start); !w.saidDue && at > due {
		w.saidDue = true
		fmt.Fprintf(w.out, "  +%5.1fs  members due back (each restarts by itself)\n", due.Seconds())
	}
}

func (w *storeWatch) summary() string {
	if w.outages == 0 {
		return "the store answered throughout"
	}
	return fmt.Sprintf("the store was unreachable for %.1fs in %d outage(s)", w.downFor.Seconds(), w.outages)
}

// schedulers is a line naming the schedulers that restarted since start
// and those not announcing their route, and whether any restarted.
func schedulers(st *pb.StatusResponse, start time.Time) (string, bool) {
	var restarted, withdrawn []string
	for _, in := range st.GetInstances() {
		if in.GetStartedAt().AsTime().After(start) {
			restarted = append(restarted, in.GetId())
		}
		if !in.GetAnnounced() {
			withdrawn = append(withdrawn, fmt.Sprintf("%s (%s)", in.GetId(), in.GetAnnounceReason()))
		}
	}
	line := fmt.Sprintf("  %d schedulers registered, none restarted during the drill", len(st.GetInstances()))
	if len(restarted) > 0 {
		line = fmt.Sprintf("  %d schedulers registered; restarted during the drill: %s", len(st.GetInstances()), strings.Join(restarted, " "))
	}
	if len(withdrawn) > 0 {
		line += "; not announcing: " + strings.Join(withdrawn, ", ")
	} else {
		line += "; all announce their route"
	}
	return line, len(restarted) > 0
}
