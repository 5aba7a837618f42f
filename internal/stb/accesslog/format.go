package accesslog

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/anysched/anysched/internal/stb/steer"
)

// encoder turns entries into JSON lines; it remembers the formatted second
// of the last timestamp, as consecutive lines almost always share it and
// time.Format is most of a line's cost.
type encoder struct {
	sec    int64
	prefix []byte // "2006-01-02T15:04:05." of sec; empty: none yet
}

// appendLine encodes one entry as a JSON object and a newline. The keys and
// their order are the documented line format.
func (c *encoder) appendLine(b []byte, e *Entry) []byte {
	b = append(b, `{"ts":"`...)
	b = c.appendTime(b, e.Time)
	b = append(b, `","proto":`...)
	b = appendString(b, e.Proto)
	b = append(b, `,"client":`...)
	if e.Client.IsValid() {
		b = append(b, '"')
		b = e.Client.AppendTo(b)
		b = append(b, '"')
	} else {
		b = append(b, `""`...)
	}
	b = append(b, `,"host":`...)
	b = appendString(b, e.Host)
	b = append(b, `,"path":`...)
	b = appendString(b, e.Path)
	b = append(b, `,"result":`...)
	b = appendString(b, e.Result.String())
	b = append(b, `,"zone":`...)
	b = appendString(b, e.Zone)
	b = append(b, `,"client_region":`...)
	b = appendString(b, e.ClientRegion)
	b = append(b, `,"region":`...)
	b = appendString(b, e.Region)
	b = append(b, `,"server":`...)
	b = appendString(b, e.Server)
	b = append(b, `,"target":`...)
	b = appendString(b, e.Target)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = append(b, `,"latency":`...)
	b = strconv.AppendInt(b, int64(e.Latency), 10) // nanoseconds
	if e.Rule != "" {                              // only then: lines without rights keep their shape
		b = append(b, `,"rule":`...)
		b = appendString(b, e.Rule)
	}
	if e.Steering != "" { // likewise: only steering manifests carry these
		b = append(b, `,"steering":`...)
		b = appendString(b, e.Steering)
		b = append(b, `,"from":`...)
		b = appendString(b, e.From)
	}
	if e.Family != steer.FamilyAny { // likewise for families
		b = append(b, `,"family":`...)
		b = appendString(b, e.Family.String())
	}
	if e.TargetFamily != steer.FamilyAny {
		b = append(b, `,"target_family":`...)
		b = appendString(b, e.TargetFamily.String())
	}
	return append(b, "}\n"...)
}

// tsLayout is the timestamp format: UTC, microseconds.
const tsLayout = "2006-01-02T15:04:05.000000Z07:00"

// appendTime appends t as tsLayout would, formatting the date and time only
// when the second changes.
func (c *encoder) appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	if sec := t.Unix(); sec != c.sec || len(c.prefix) == 0 {
		c.sec = sec
		c.prefix = t.AppendFormat(c.prefix[:0], "2006-01-02T15:04:05.")
	}
	b = append(b, c.prefix...)
	us := t.Nanosecond() / 1000 // truncated, as Format does
	var d [6]byte
	for i := 5; i >= 0; i-- {
		d[i] = byte('0' + us%10)
		us /= 10
	}
	b = append(b, d[:]...)
	return append(b, 'Z')
}

// appendString appends s as a JSON string; the fast path, for strings
// without a byte that needs escaping, copies it as is.
func appendString(b []byte, s string) []byte {
	if needsEscape(s) {
		q, _ := json.Marshal(s) // rare: escape properly (and replace invalid UTF-8)
		return append(b, q...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// needsEscape reports whether s has a control character, '"', '\\' or a
// non-ASCII byte. It tests eight bytes at a time, the last word overlapping
// the one before and a short string padded with a harmless byte, as this
// scan is a large part of a line's encoding.
func needsEscape(s string) bool {
	n := len(s)
	if n < 8 {
		x := uint64(ones * 'a')
		for i := 0; i < n; i++ {
			x = x<<8 | uint64(s[i])
		}
		return escapeIn(x)
	}
	for i := 0; i+8 <= n; i += 8 {
		if escapeIn(word(s[i : i+8])) {
			return true
		}
	}
	return n%8 != 0 && escapeIn(word(s[n-8:]))
}

const ones, highs = 0x0101010101010101, 0x8080808080808080

// word loads eight bytes (the compiler makes this one load).
func word(w string) uint64 {
	_ = w[7]
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

// escapeIn reports whether a byte of x needs escaping. Each test below is
// exact for "some byte of x is ..." (once bytes >= 0x80 are ruled out).
func escapeIn(x uint64) bool {
	q, bs := x^(ones*'"'), x^(ones*'\\')
	ctl := (x - ones*0x20) &^ x    // a byte < 0x20
	quote := (q - ones) &^ q       // a byte == '"'
	backslash := (bs - ones) &^ bs // a byte == '\\'
	return (x|ctl|quote|backslash)&highs != 0
}
