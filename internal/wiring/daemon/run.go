package daemon

import (
	"context"
	"errors"

	"golang.org/x/sync/errgroup"
)

// RunAll runs components until ctx ends or one fails; a component's clean
// return before ctx ends is a failure too, since all of them should run for
// the life of the daemon.
func RunAll(ctx context.Context, comps ...func(context.Context) error) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, run := range comps {
		g.Go(func() error {
			err := run(gctx)
			if err == nil && gctx.Err() == nil {
				return errors.New("component stopped unexpectedly")
			}
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		})
	}
	return g.Wait()
}
