package ctl

import (
	"context"
	"flag"
	"io"
	"strconv"
	"strings"
	"time"

	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// auditCmd lists the admin audit trail, newest first.
func auditCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	limit := fs.Int("limit", 50, "at most this many entries (the center caps it at 10000)")
	since := fs.Duration("since", 0, "only entries of the last `DURATION` (e.g. 24h); 0: any age")
	o := outputFlag(fs, formatTable, formatJSON, formatYAML)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if *limit < 1 {
		return usagef("--limit %d: want at least 1", *limit)
	}
	if *since < 0 {
		return usagef("--since %s: want a positive duration", *since)
	}
	req := &pb.AuditRequest{Limit: int32(min(*limit, 1<<30))}
	if *since > 0 {
		req.Since = timestamppb.New(e.clock.Now().Add(-*since))
	}
	resp, err := e.admin.Audit(ctx, req)
	if err != nil {
		return err
	}
	return render(e.out, o, resp, func(w io.Writer) error {
		t := newTable("AT", "IDENTITY", "ROLE", "PEER", "METHOD", "TARGET", "CODE", "REVISION", "DETAIL")
		for _, a := range resp.GetEntries() {
			rev := "-"
			if a.GetRevision() != 0 {
				rev = strconv.FormatInt(a.GetRevision(), 10)
			}
			detail := a.GetDetail()
			if m := a.GetMessage(); m != "" && detail != "" {
				detail += "; " + m
			} else if m != "" {
				detail = m
			}
			t.add(a.GetAt().AsTime().Local().Format(time.DateTime), a.GetIdentity(), a.GetRole(), a.GetPeer(),
				strings.TrimPrefix(a.GetMethod(), "/anysched.v1.Admin/"), orDash(a.GetTarget()), a.GetCode(), rev, orDash(detail))
		}
		return writeTables(w, t)
	})
}
