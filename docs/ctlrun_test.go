package docs_test

import (
	"context"
	"io"

	"github.com/anysched/anysched/internal/admin/ctl"
)

// ctlRun runs schedctl in-process, its output and errors to w.
func ctlRun(args []string, w io.Writer) error {
	return ctl.Run(context.Background(), args, w, w)
}
