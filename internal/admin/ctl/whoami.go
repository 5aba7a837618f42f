package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"

	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// whoamiCmd prints who the center takes this caller for: the identity of
// the client certificate (or "local") and its role.
func whoamiCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("whoami", flag.ContinueOnError)
	o := outputFlag(fs, formatTable, formatJSON, formatYAML)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	resp, err := e.admin.WhoAmI(ctx, &pb.WhoAmIRequest{})
	if err != nil {
		return err
	}
	return render(e.out, o, resp, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "identity: %s\nrole:     %s\npeer:     %s\n", resp.GetIdentity(), resp.GetRole(), resp.GetPeer())
		return err
	})
}
