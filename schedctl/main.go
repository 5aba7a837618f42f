// Command schedctl is the operator CLI of anysched: apply and inspect the
// province topology and the state of every scheduler through the central
// scheduler's admin API. The commands are in internal/admin/ctl.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/anysched/anysched/internal/admin/ctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := ctl.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case err == ctl.ErrUsage:
		os.Exit(2) // the usage is printed already
	case errors.Is(err, ctl.ErrUsage):
		fmt.Fprintln(os.Stderr, err) // already "schedctl COMMAND: ..."
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
