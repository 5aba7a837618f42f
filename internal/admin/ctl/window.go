package ctl

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// timeForms is what --from and --until accept, as their errors say it.
const timeForms = "RFC 3339 (2026-12-07T22:00:00+08:00), now, +DURATION (+2h, +90m, +1d), HH:MM (local time, the next one) or YYYY-MM-DD HH:MM (local time)"

// parseWhen reads a time an operator types for flag (named in errors):
// RFC 3339; "now"; +DURATION after base (Go's units, and d for 24 h);
// HH:MM, the first such local time after base (so 22:00 typed at 23:00 is
// tomorrow's, and --until 04:00 after --from 22:00 the next morning's);
// or YYYY-MM-DD HH:MM in local time.
func parseWhen(flag, s string, base time.Time, loc *time.Location) (time.Time, error) {
	bad := func(why string) error {
		return usagef("%s: %q is not a time%s: want %s", flag, s, why, timeForms)
	}
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return time.Time{}, bad("")
	case s == "now":
		return base, nil
	case strings.HasPrefix(s, "+"):
		d, err := parseDuration(s[1:])
		if err != nil || d <= 0 {
			return time.Time{}, bad(" (a duration after + must be positive)")
		}
		return base.Add(d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02 15:04", s, loc); err == nil {
		return t, nil
	}
	if c, err := time.ParseInLocation("15:04", s, loc); err == nil {
		b := base.In(loc)
		t := time.Date(b.Year(), b.Month(), b.Day(), c.Hour(), c.Minute(), 0, 0, loc)
		if !t.After(base) {
			t = time.Date(b.Year(), b.Month(), b.Day()+1, c.Hour(), c.Minute(), 0, 0, loc)
		}
		return t, nil
	}
	return time.Time{}, bad("")
}

// parseDuration is time.ParseDuration with d for days (24 h).
func parseDuration(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, err
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// window reads --from and --until at now: nil for a flag not given; --until
// counts from --from when both are given. The center checks the window
// again (a week at most, and so on); here only what is plainly wrong.
func window(e *env, from, until string) (f, u *timestamppb.Timestamp, err error) {
	now := e.clock.Now()
	start := now
	if from != "" {
		t, err := parseWhen("--from", from, now, e.location())
		if err != nil {
			return nil, nil, err
		}
		if t.Before(now.Add(-time.Minute)) {
			return nil, nil, usagef("--from: %s is in the past; leave --from out to start now", when(e, t))
		}
		start, f = t, timestamppb.New(t)
	}
	if until == "" {
		return f, nil, nil
	}
	t, err := parseWhen("--until", until, start, e.location())
	if err != nil {
		return nil, nil, err
	}
	switch {
	case !t.After(now):
		return nil, nil, usagef("--until: %s is not in the future", when(e, t))
	case !t.After(start):
		return nil, nil, usagef("--until: %s is not after --from %s", when(e, t), when(e, start))
	}
	return f, timestamppb.New(t), nil
}

// location is where the operator's local times are.
func (e *env) location() *time.Location {
	if e.loc == nil {
		return time.Local
	}
	return e.loc
}

// when is t as an operator reads it: local time with its zone.
func when(e *env, t time.Time) string { return t.In(e.location()).Format("2006-01-02 15:04 MST") }

// windowWords is a window in words: "from X until Y (D)", an open side
// said as such.
func windowWords(e *env, from, until *timestamppb.Timestamp) string {
	switch {
	case from == nil && until == nil:
		return ""
	case until == nil:
		return "from " + when(e, from.AsTime()) + " until undrained"
	case from == nil:
		return "from now until " + when(e, until.AsTime())
	}
	return fmt.Sprintf("from %s until %s (%s)", when(e, from.AsTime()), when(e, until.AsTime()), until.AsTime().Sub(from.AsTime()))
}

// drainWindow is a drain's window in the status table: "-" for none.
func drainWindow(d *pb.DrainEntry) string {
	if d.GetFrom() == nil && d.GetUntil() == nil {
		return "-"
	}
	from, until := "now", "undrain"
	if d.GetFrom() != nil {
		from = d.GetFrom().AsTime().Format(time.RFC3339)
	}
	if d.GetUntil() != nil {
		until = d.GetUntil().AsTime().Format(time.RFC3339)
	}
	return from + " – " + until
}
