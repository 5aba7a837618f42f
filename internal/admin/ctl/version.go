package ctl

import (
	"context"
	"flag"
	"fmt"

	"github.com/anysched/anysched/internal/wiring/version"
)

// versionCmd prints schedctl's version, to compare with the daemons' (in
// status).
func versionCmd(_ context.Context, e *env, args []string) error {
	if err := e.parse(flag.NewFlagSet("version", flag.ContinueOnError), args); err != nil {
		return err
	}
	_, err := fmt.Fprintln(e.out, "schedctl", version.String())
	return err
}
