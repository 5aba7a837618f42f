package netconfig

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// InNamespace runs fn on an OS thread that has entered the named network
// namespace (`ip netns add NAME`), then returns the thread to its own.
// Sockets and devices fn creates belong to the named namespace and stay
// there. A thread that cannot return stays locked, so the runtime retires it
// instead of reusing it in the wrong namespace (the main thread cannot be
// retired: a process left there would count as one of the namespace's pids).
func InNamespace(name string, fn func() error) error {
	target, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("netconfig: namespace %s: %w", name, err)
	}
	defer target.Close()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netconfig: current namespace: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netconfig: enter namespace %s: %w", name, err)
	}
	defer func() {
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return fn()
}
