package lab

import (
	"context"
	"slices"
	"time"

	"github.com/anysched/anysched/internal/testbed/chaos"
)

// Network faults: a city router's link to the core down, up again when
// the fault ends.

// cutLink takes the link of the city Target down.
type cutLink struct{ l *Lab }

func (f *cutLink) inject(_ context.Context, d *chaos.Done) error {
	i := f.city(d)
	d.Begin = time.Now()
	return f.l.SetCityLink(i, false)
}

func (f *cutLink) heal(_ context.Context, d *chaos.Done) error {
	err := f.l.SetCityLink(f.city(d), true)
	d.End = time.Now()
	return err
}

// city is the index of the fault's city.
func (f *cutLink) city(d *chaos.Done) int { return slices.Index(f.l.o.Cities, d.Target) }
