package ctl

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// applyCmd sends a topology document to be validated and stored; the
// center validates it (every problem comes back named by its field path).
func applyCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	file := fs.String("f", "", "topology file (YAML); - for standard input")
	dry := fs.Bool("dry-run", false, "validate on the server, store nothing")
	force := fs.Bool("force", false, "apply even if the document is based on an older revision")
	base := fs.Int64("base-revision", 0, "the revision the document was based on (default: its revision: field)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if err := need("-f FILE", *file); err != nil {
		return err
	}
	doc, err := readDocument(e, *file)
	if err != nil {
		return err
	}
	resp, err := e.admin.ApplyTopology(ctx, &pb.ApplyTopologyRequest{Document: doc, DryRun: *dry, Force: *force, BaseRevision: *base})
	if err != nil {
		return err
	}
	s := resp.GetSummary()
	counts := fmt.Sprintf("%d regions, %d nodes, %d servers, %d zones (%d networks), %d services", s.GetRegions(), s.GetNodes(), s.GetServers(), s.GetZones(), s.GetNetworks(), s.GetServices())
	switch {
	case *dry && resp.GetChanged():
		fmt.Fprintf(e.out, "valid: %s; would replace revision %d\n", counts, resp.GetRevision())
	case *dry:
		fmt.Fprintf(e.out, "valid: %s; identical to revision %d\n", counts, resp.GetRevision())
	case resp.GetApplied():
		fmt.Fprintf(e.out, "applied revision %d: %s\n", resp.GetRevision(), counts)
	default:
		fmt.Fprintf(e.out, "unchanged: revision %d already holds this topology\n", resp.GetRevision())
	}
	return nil
}

// readDocument reads -f: a file, or standard input for "-".
func readDocument(e *env, file string) ([]byte, error) {
	var doc []byte
	var err error
	if file == "-" {
		doc, err = io.ReadAll(e.stdin)
	} else {
		doc, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("-f: %w", err)
	}
	if len(bytes.TrimSpace(doc)) == 0 {
		// Likely a pipeline whose first command failed: say so here rather
		// than have the center list every section as missing.
		return nil, fmt.Errorf("-f %s: the document is empty", file)
	}
	return doc, nil
}
