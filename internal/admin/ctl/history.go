package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// historyCmd lists the recorded applies and rollbacks, newest first.
func historyCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("history", flag.ContinueOnError)
	limit := fs.Int("limit", 20, "at most this many entries; 0: all recorded")
	o := outputFlag(fs, formatTable, formatJSON, formatYAML)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if *limit < 0 {
		return usagef("--limit %d: want 0 or more", *limit)
	}
	resp, err := e.admin.History(ctx, &pb.HistoryRequest{Limit: int32(min(*limit, 1<<30))})
	if err != nil {
		return err
	}
	return render(e.out, o, resp, func(w io.Writer) error {
		t := newTable("REVISION", "APPLIED", "BY", "SERVERS", "NETWORKS", "KEPT", "DIGEST", "NOTE")
		t.title = fmt.Sprintf("current revision %d", resp.GetCurrent())
		for _, h := range resp.GetEntries() {
			rev := strconv.FormatInt(h.GetRevision(), 10)
			if h.GetRevision() == resp.GetCurrent() {
				rev += "*"
			}
			kept := "no"
			if h.GetKept() {
				kept = "yes"
			}
			digest := h.GetDigest()
			if len(digest) > 12 {
				digest = digest[:12]
			}
			t.add(rev, h.GetAppliedAt().AsTime().Local().Format(time.DateTime), orDash(h.GetIdentity()),
				h.GetSummary().GetServers(), h.GetSummary().GetNetworks(), kept, digest, orDash(h.GetNote()))
		}
		return writeTables(w, t)
	})
}
