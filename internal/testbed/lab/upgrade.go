package lab

import "path/filepath"

// schedulerBin is where the schedulers' binaries come from at the start
// (Options.SchedulerBin, else Bin).
func (l *Lab) schedulerBin() string {
	if l.o.SchedulerBin != "" {
		return l.o.SchedulerBin
	}
	return l.o.Bin
}

// Bin is the directory of the lab's own build (Options.Bin): the current
// tree's schedulers and tools.
func (l *Lab) Bin() string { return l.o.Bin }

// RestartWith starts an exited scheduler again with the binary of the same
// name in dir, with the same arguments otherwise: an upgrade (or a
// downgrade) of that one daemon, as a package upgrade's restart of its
// unit would be. Stopping it first (SIGTERM, Proc.Wait) is the caller's.
func (l *Lab) RestartWith(name, dir string) error {
	return l.restart(name, func(p *Proc) { p.args[0] = filepath.Join(dir, filepath.Base(p.args[0])) })
}
