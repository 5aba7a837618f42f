package httpd

import (
	"net/http"
	"sync/atomic"
	"time"
)

// dateCache is the Date header value, formatted once a second rather than
// for every answer.
type dateCache struct{ p atomic.Pointer[dateValue] }

type dateValue struct {
	sec int64
	b   []byte
}

// append appends now's Date value (the second it falls in) to b.
func (c *dateCache) append(b []byte, now time.Time) []byte {
	sec := now.Unix()
	v := c.p.Load()
	if v == nil || v.sec != sec {
		v = &dateValue{sec: sec, b: time.Unix(sec, 0).UTC().AppendFormat(make([]byte, 0, len(http.TimeFormat)), http.TimeFormat)}
		c.p.Store(v)
	}
	return append(b, v.b...)
}
