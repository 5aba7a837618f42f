// Package authz decides who may call the admin API: the caller's identity
// and role come from its client certificate (mutual TLS), or are "local"
// for a plaintext caller on a loopback listener.
package authz

import (
	"context"
	"fmt"
)

// Role is what a caller may do; each role includes the ones below it.
type Role int

const (
	// None may call nothing.
	None Role = iota
	// Viewer reads: get, status, explain, history, diff, audit.
	Viewer
	// Operator changes: apply, drain, lab drills, rollback-free edits.
	Operator
	// Admin overrides guards: production drills, forced applies, rollback.
	Admin
)

var roleNames = [...]string{None: "none", Viewer: "viewer", Operator: "operator", Admin: "admin"}

func (r Role) String() string {
	if r < None || r > Admin {
		return fmt.Sprintf("role(%d)", int(r))
	}
	return roleNames[r]
}

// ParseRole reads a role name.
func ParseRole(s string) (Role, error) {
	for r, n := range roleNames {
		if n == s && Role(r) != None {
			return Role(r), nil
		}
	}
	return None, fmt.Errorf("authz: unknown role %q (viewer, operator, admin)", s)
}

// Caller is who made an admin call, as the server authenticated it.
type Caller struct {
	Identity string // certificate subject CN, or "local"
	Role     Role
	Peer     string // remote address
}

type callerKey struct{}

// NewContext returns ctx carrying the caller.
func NewContext(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// FromContext returns the caller the interceptor authenticated.
func FromContext(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}
