// Package logtest captures what a component logs through log/slog, so that
// a test can assert on the messages an operator would read.
package logtest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// Recorder is a slog.Handler that keeps every record, attributes included
// (those added with Logger.With too).
type Recorder struct {
	mu    *sync.Mutex
	recs  *[]Record
	attrs []slog.Attr
	group string
}

// Record is one logged message.
type Record struct {
	Level   slog.Level
	Message string
	Attrs   map[string]string // by key, groups joined with "."
}

// String is the record as a text line: LEVEL message key=value...
func (r Record) String() string {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	for k, v := range r.Attrs {
		b.WriteString(" " + k + "=" + v)
	}
	return b.String()
}

// New returns an empty Recorder.
func New() *Recorder { return &Recorder{mu: new(sync.Mutex), recs: new([]Record)} }

// Logger is a logger writing to r.
func (r *Recorder) Logger() *slog.Logger { return slog.New(r) }

// Enabled implements slog.Handler: every level is kept.
func (r *Recorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler.
func (r *Recorder) Handle(_ context.Context, rec slog.Record) error {
	out := Record{Level: rec.Level, Message: rec.Message, Attrs: map[string]string{}}
	for _, a := range r.attrs {
		out.Attrs[a.Key] = a.Value.String()
	}
	rec.Attrs(func(a slog.Attr) bool {
		k := a.Key
		if r.group != "" {
			k = r.group + "." + k
		}
		out.Attrs[k] = a.Value.String()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.recs = append(*r.recs, out)
	return nil
}

// WithAttrs implements slog.Handler.
func (r *Recorder) WithAttrs(as []slog.Attr) slog.Handler {
	n := *r
	n.attrs = append(append([]slog.Attr(nil), r.attrs...), as...)
	return &n
}

// WithGroup implements slog.Handler.
func (r *Recorder) WithGroup(name string) slog.Handler {
	n := *r
	if n.group != "" {
		name = n.group + "." + name
	}
	n.group = name
	return &n
}

// Records returns the records at level or above.
func (r *Recorder) Records(level slog.Level) []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Record
	for _, rec := range *r.recs {
		if rec.Level >= level {
			out = append(out, rec)
		}
	}
	return out
}

// Containing returns the records at level or above whose message contains s.
func (r *Recorder) Containing(level slog.Level, s string) []Record {
	var out []Record
	for _, rec := range r.Records(level) {
		if strings.Contains(rec.Message, s) {
			out = append(out, rec)
		}
	}
	return out
}
