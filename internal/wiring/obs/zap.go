package obs

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ZapLogger returns a zap logger (what etcd's client and server want) that
// writes through l, so every component logs to one place in one format.
// Entries below min are dropped: etcd is chatty at info.
func ZapLogger(l *slog.Logger, min zapcore.Level) *zap.Logger {
	return ZapLoggerDemoting(l, min, nil)
}

// ZapLoggerDemoting is ZapLogger, but an entry for which demote returns true
// counts as DEBUG: what a library logs at ERROR although it is expected at
// that moment (etcd's server reports its listeners closing on a deliberate
// stop as a failure). demote may be nil.
func ZapLoggerDemoting(l *slog.Logger, min zapcore.Level, demote func(zapcore.Entry) bool) *zap.Logger {
	return zap.New(&zapCore{l: l, min: min, demote: demote})
}

type zapCore struct {
	l      *slog.Logger
	min    zapcore.Level
	demote func(zapcore.Entry) bool
	fields []zapcore.Field
}

func (c *zapCore) Enabled(lv zapcore.Level) bool { return lv >= c.min }

func (c *zapCore) With(fs []zapcore.Field) zapcore.Core {
	return &zapCore{l: c.l, min: c.min, demote: c.demote, fields: append(append([]zapcore.Field(nil), c.fields...), fs...)}
}

func (c *zapCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.demote != nil && e.Level > zapcore.DebugLevel && c.demote(e) {
		e.Level = zapcore.DebugLevel
	}
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *zapCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fs {
		f.AddTo(enc)
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields)+1)
	if e.LoggerName != "" {
		attrs = append(attrs, slog.String("logger", e.LoggerName))
	}
	for k, v := range enc.Fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	lv := slog.LevelInfo
	switch {
	case e.Level >= zapcore.ErrorLevel:
		lv = slog.LevelError
	case e.Level == zapcore.WarnLevel:
		lv = slog.LevelWarn
	case e.Level <= zapcore.DebugLevel:
		lv = slog.LevelDebug
	}
	c.l.LogAttrs(context.Background(), lv, e.Message, attrs...)
	return nil
}

func (c *zapCore) Sync() error { return nil }
