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
	GoAll(gctx, g, comps)
	return g.Wait()
}

// GoAll starts each component in g under ctx, as RunAll does, for a caller
// that runs more in g.
func GoAll(ctx context.Context, g *errgroup.Group, comps []func(context.Context) error) {
	for _, run := range comps {
		g.Go(func() error {
			err := run(ctx)
			if err == nil && ctx.Err() == nil {
				return errors.New("component stopped unexpectedly")
			}
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		})
	}
}
