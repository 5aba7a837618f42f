package lab

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/anysched/anysched/internal/testbed/chaos"
)

// Process faults: a daemon (scheduler, center, edge) killed and restarted
// after the fault's length, or frozen and continued.

// kill sends sig to the fault's processes, waits for each to exit within
// within, and restarts them when the fault ends.
type kill struct {
	l      *Lab
	sig    syscall.Signal
	within time.Duration
	names  []string // the processes killed, for heal
}

func (f *kill) inject(_ context.Context, d *chaos.Done) error {
	return f.killAll(d, d.Target)
}

// killAll kills names one after the other; the fault began before the
// first signal and the processes exited after the last exit.
func (f *kill) killAll(d *chaos.Done, names ...string) error {
	f.names = names
	d.Begin = time.Now()
	for _, n := range names {
		if err := f.l.killAndWait(n, f.sig, f.within); err != nil {
			return err
		}
	}
	d.Exited = time.Now()
	return nil
}

// heal restarts every process killed; the first failure is the fault's.
func (f *kill) heal(_ context.Context, d *chaos.Done) error {
	d.End = time.Now() // back from here on, as far as the checks go
	var first error
	for _, n := range f.names {
		if err := f.l.Restart(n); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// killAndWait sends sig to the daemon name and waits up to within for it
// to exit.
func (l *Lab) killAndWait(name string, sig syscall.Signal, within time.Duration) error {
	p := l.Proc(name)
	if p == nil {
		return fmt.Errorf("no daemon %q", name)
	}
	if err := l.signal(name, sig); err != nil {
		return err
	}
	if !p.Wait(within) {
		return fmt.Errorf("%s did not exit within %s of %s", name, within, sig)
	}
	return nil
}

// freeze stops a daemon (SIGSTOP) and continues it (SIGCONT) when the
// fault ends; a scheduler the watchdog killed meanwhile is started again,
// as its unit's Restart=on-failure would.
type freeze struct{ l *Lab }

func (f *freeze) inject(_ context.Context, d *chaos.Done) error {
	d.Begin = time.Now()
	return f.l.signal(d.Target, syscall.SIGSTOP)
}

func (f *freeze) heal(_ context.Context, d *chaos.Done) error {
	err := f.l.signal(d.Target, syscall.SIGCONT)
	if p := f.l.Proc(d.Target); p != nil && p.Wait(0) {
		if fired := f.l.WatchdogFired(d.Target); !fired.IsZero() {
			d.Exited = fired
			d.Detail = "killed by the watchdog " + fired.Sub(d.Begin).Round(time.Millisecond).String() + " after it froze"
		}
		err = f.l.Restart(d.Target)
	}
	d.End = time.Now()
	return err
}
