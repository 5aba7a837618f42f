// Package audit records every admin call (who, from where, what, outcome)
// in etcd with bounded retention and in the log.
package audit

import "context"

// Note is what a handler adds to its call's audit record: what it acted on
// and what it changed. The audit interceptor creates it; handlers fill it.
type Note struct {
	Target   string // a region, "server/<name>", "revision/<n>"
	Detail   string // one line: an apply's diff summary
	Revision int64  // the topology revision after the call
}

type noteKey struct{}

// WithNote returns ctx carrying an empty note, and the note.
func WithNote(ctx context.Context) (context.Context, *Note) {
	n := &Note{}
	return context.WithValue(ctx, noteKey{}, n), n
}

// Annotate lets a handler fill its call's note; without one (a call made
// in-process, outside the interceptor) it does nothing.
func Annotate(ctx context.Context, f func(*Note)) {
	if n, ok := ctx.Value(noteKey{}).(*Note); ok {
		f(n)
	}
}
