package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"

	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// explainCmd shows how the center (or a region's scheduler) would answer
// one STB request, and why each candidate server was or was not taken.
func explainCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	client := fs.String("client-ip", "", "the STB's address")
	host := fs.String("host", "", "the hostname the STB asked for")
	path := fs.String("path", "", "the request path (and query), e.g. /ch1/index.m3u8 (default: none, the URL shows the channel as CHANNEL)")
	region := fs.String("region", "", "explain as this region's scheduler (default: as the center)")
	o := outputFlag(fs, formatTable, formatJSON)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if err := need("--client-ip", *client, "--host", *host); err != nil {
		return err
	}
	resp, err := e.admin.Explain(ctx, &pb.ExplainRequest{ClientIp: *client, Host: *host, Path: *path, Region: *region})
	if err != nil {
		return err
	}
	return render(e.out, o, resp, func(w io.Writer) error { return explanation(w, resp) })
}

// explanation is the decision, the steps that led to it, then the
// candidates.
func explanation(w io.Writer, x *pb.ExplainResponse) error {
	fmt.Fprintf(w, "revision %d: %s", x.GetRevision(), x.GetResult())
	if x.GetServer() != "" {
		fmt.Fprintf(w, " -> %s (%s%s) at %d kbps\n  %s\n", x.GetServer(), x.GetAddress(), familyNote(x), x.GetBitrateKbps(), x.GetLocation())
	} else {
		fmt.Fprintf(w, ": %s\n", x.GetReason())
	}
	for _, st := range x.GetSteps() {
		fmt.Fprintf(w, "  - %s\n", st)
	}
	if len(x.GetCandidates()) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	t := newTable("SERVER", "NODE", "REGION", "ADDRESS", "KM", "WEIGHT", "AVAILABLE", "WHY")
	for _, c := range x.GetCandidates() {
		t.add(c.GetServer(), c.GetNode(), c.GetRegion(), c.GetAddress(), strconv.FormatFloat(c.GetDistanceKm(), 'f', 1, 64),
			weightText(int64(c.GetWeight()), c.GetTopologyWeight()), c.GetAvailable(), c.GetWhy())
	}
	return writeTables(w, t)
}

// weightText is an effective weight and, where it differs, the topology's:
// "60 (topology 100)". A center that sends no topology weight (0) sent the
// topology's as the weight.
func weightText(effective int64, topology int32) string {
	s := strconv.FormatInt(effective, 10)
	if topology != 0 && int64(topology) != effective {
		s += fmt.Sprintf(" (topology %d)", topology)
	}
	return s
}

// familyNote says the family of the address given, and the STB's where it
// differs (family_fallback other); "" from a center that does not say.
func familyNote(x *pb.ExplainResponse) string {
	switch af, f := x.GetAddressFamily(), x.GetFamily(); {
	case af == "":
		return ""
	case f != "" && f != af:
		return ", " + af + " for an " + f + " STB"
	default:
		return ", " + af
	}
}
