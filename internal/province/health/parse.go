package health

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"strconv"
	"strings"

	"github.com/anysched/anysched/internal/province/health/avail"
)

// MaxBody is the most of a probe response body that is read or parsed.
// Status pages are a few hundred bytes; anything past this is ignored.
const MaxBody = 64 << 10

// ErrNoLoad is returned by ParseStats for a well-formed JSON object that
// carries none of the known load fields (e.g. {"status":"ok"}).
var ErrNoLoad = errors.New("no load figures")

// maxJSONInt bounds integral JSON figures: above 2^53 a float64 no longer
// holds every integer, so such a value cannot be a faithful count.
const maxJSONInt = 1 << 53

// ParseStubStatus parses the output of nginx's stub_status module:
//
//	Active connections: 291
//	server accepts handled requests
//	 16630948 16630948 31070465
//	Reading: 6 Writing: 179 Waiting: 106
//
// Connections is the active count, Requests the third counter. The first
// three lines are required, in that order; the Reading/Writing/Waiting line is
// checked when present; later lines are ignored (forward compatibility). CRLF
// line ends and surrounding spaces are accepted. Only the first MaxBody bytes
// are looked at.
func ParseStubStatus(body []byte) (avail.Load, error) {
	if len(body) > MaxBody {
		body = body[:MaxBody]
	}
	lines := strings.Split(strings.ReplaceAll(string(body), "\r\n", "\n"), "\n")
	line := func(i int) []string {
		if i < len(lines) {
			return strings.Fields(lines[i])
		}
		return nil
	}

	f := line(0)
	if len(f) != 3 || f[0] != "Active" || f[1] != "connections:" {
		return avail.Load{}, fmt.Errorf("stub_status: line 1: want \"Active connections: N\", got %q", clip(lineAt(lines, 0)))
	}
	active, err := parseCount(f[2], strconv.IntSize-1)
	if err != nil {
		return avail.Load{}, fmt.Errorf("stub_status: line 1: active connections: %w", err)
	}

	f = line(1)
	if len(f) != 4 || f[0] != "server" || f[1] != "accepts" || f[2] != "handled" || f[3] != "requests" {
		return avail.Load{}, fmt.Errorf("stub_status: line 2: want \"server accepts handled requests\", got %q", clip(lineAt(lines, 1)))
	}

	f = line(2)
	if len(f) != 3 {
		return avail.Load{}, fmt.Errorf("stub_status: line 3: want three counters, got %q", clip(lineAt(lines, 2)))
	}
	var counters [3]int64
	for i, name := range []string{"accepts", "handled", "requests"} {
		v, err := parseCount(f[i], 63)
		if err != nil {
			return avail.Load{}, fmt.Errorf("stub_status: line 3: %s: %w", name, err)
		}
		counters[i] = int64(v)
	}

	if f = line(3); len(f) > 0 {
		if len(f) != 6 || f[0] != "Reading:" || f[2] != "Writing:" || f[4] != "Waiting:" {
			return avail.Load{}, fmt.Errorf("stub_status: line 4: want \"Reading: N Writing: N Waiting: N\", got %q", clip(lineAt(lines, 3)))
		}
		for _, i := range []int{1, 3, 5} {
			if _, err := parseCount(f[i], 63); err != nil {
				return avail.Load{}, fmt.Errorf("stub_status: line 4: %s %w", strings.TrimSuffix(f[i-1], ":"), err)
			}
		}
	}
	return avail.Load{Connections: int(active), Requests: counters[2]}, nil
}

// parseCount parses a non-negative decimal integer of at most bits bits.
func parseCount(s string, bits int) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return 0, fmt.Errorf("%q out of range", clip(s))
		}
		return 0, fmt.Errorf("%q is not a non-negative integer", clip(s))
	}
	return v, nil
}

func lineAt(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "" // missing line
}

// clip keeps error messages short when the input is garbage.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// ParseStats parses a JSON stats body such as
//
//	{"cpu": 0.42, "bandwidth_mbps": 812.5, "connections": 1200}
//
// Known fields (all optional, null = absent):
//   - cpu: utilisation as a fraction in [0,1]. A value above 1 is an error,
//     not silently read as a percent: 0.5 could be either "half busy" or
//     "0.5 percent", and guessing wrong by 100x is worse than refusing.
//     Exporters that report percent use cpu_percent instead.
//   - cpu_percent: utilisation in [0,100], divided by 100. Ignored when cpu is
//     also present.
//   - memory: share of memory in use, a fraction in [0,1] (like cpu, no
//     percent guessing).
//   - load_avg (or load): the load average, finite and >= 0; either a
//     number or the [1, 5, 15]-minute array that os.getloadavg() and
//     Node's os.loadavg() give, of which the 1-minute figure is taken.
//     load is ignored when load_avg is also present.
//   - bandwidth_mbps: current egress in Mbit/s, finite and >= 0.
//   - connections: active connections, an integer >= 0.
//   - requests: total requests served, an integer >= 0.
//
// Unknown fields are ignored. A well-formed object with none of the known
// fields, or a valid JSON document that is not an object, returns ErrNoLoad.
// Only the first MaxBody bytes are looked at (a longer body therefore fails
// as truncated JSON).
func ParseStats(body []byte) (avail.Load, error) {
	if len(body) > MaxBody {
		body = body[:MaxBody]
	}
	var raw struct {
		CPU         *float64        `json:"cpu"`
		CPUPercent  *float64        `json:"cpu_percent"`
		Memory      *float64        `json:"memory"`
		Load        json.RawMessage `json:"load"`
		LoadAvg     json.RawMessage `json:"load_avg"`
		Bandwidth   *float64        `json:"bandwidth_mbps"`
		Connections *float64        `json:"connections"`
		Requests    *float64        `json:"requests"`
		Errors      *float64        `json:"errors"`
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return avail.Load{}, errors.New("stats: empty body")
	}
	if trimmed[0] != '{' {
		if json.Valid(trimmed) {
			return avail.Load{}, ErrNoLoad // an array, string, number, true/false or null
		}
		return avail.Load{}, errors.New("stats: not a JSON object")
	}
	if err := json.Unmarshal(trimmed, &raw); err != nil {
		return avail.Load{}, fmt.Errorf("stats: %w", err)
	}
	loadName, loadRaw := "load_avg", raw.LoadAvg
	if isNull(loadRaw) {
		loadName, loadRaw = "load", raw.Load
	}
	if raw.CPU == nil && raw.CPUPercent == nil && raw.Memory == nil && isNull(loadRaw) &&
		raw.Bandwidth == nil && raw.Connections == nil && raw.Requests == nil && raw.Errors == nil {
		return avail.Load{}, ErrNoLoad
	}
	var l avail.Load
	switch {
	case raw.CPU != nil:
		v := *raw.CPU
		if !finite(v) || v < 0 || v > 1 {
			return avail.Load{}, fmt.Errorf("stats: cpu %v out of range [0,1] (a fraction; use cpu_percent for percent)", v)
		}
		l.CPU = math.Abs(v) // -0 -> 0
	case raw.CPUPercent != nil:
		v := *raw.CPUPercent
		if !finite(v) || v < 0 || v > 100 {
			return avail.Load{}, fmt.Errorf("stats: cpu_percent %v out of range [0,100]", v)
		}
		l.CPU = math.Abs(v) / 100
	}
	if raw.Memory != nil {
		v := *raw.Memory
		if !finite(v) || v < 0 || v > 1 {
			return avail.Load{}, fmt.Errorf("stats: memory %v out of range [0,1] (a fraction of memory in use)", v)
		}
		l.Memory = math.Abs(v)
	}
	if !isNull(loadRaw) {
		v, err := loadAverage(loadRaw)
		if err != nil {
			return avail.Load{}, fmt.Errorf("stats: %s %w", loadName, err)
		}
		l.LoadAvg = v
	}
	if raw.Bandwidth != nil {
		v := *raw.Bandwidth
		if !finite(v) || v < 0 {
			return avail.Load{}, fmt.Errorf("stats: bandwidth_mbps %v: want a finite number >= 0", v)
		}
		l.BandwidthMbps = math.Abs(v)
	}
	if raw.Connections != nil {
		v, err := jsonCount(*raw.Connections, math.MaxInt)
		if err != nil {
			return avail.Load{}, fmt.Errorf("stats: connections %w", err)
		}
		l.Connections = int(v)
	}
	if raw.Requests != nil {
		v, err := jsonCount(*raw.Requests, math.MaxInt64)
		if err != nil {
			return avail.Load{}, fmt.Errorf("stats: requests %w", err)
		}
		l.Requests = v
	}
	if raw.Errors != nil {
		v, err := jsonCount(*raw.Errors, math.MaxInt64)
		if err != nil {
			return avail.Load{}, fmt.Errorf("stats: errors %w", err)
		}
		l.Errors = v
	}
	return l, nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// isNull reports whether a raw JSON field is absent or null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// tooBig reports whether a decoding error is a number beyond float64.
func tooBig(err error) bool {
	var te *json.UnmarshalTypeError
	return errors.As(err, &te) && strings.HasPrefix(te.Value, "number")
}

// loadAverage reads a load average: a number, or an array of one to three
// numbers (1, 5 and 15 minutes) of which the first counts. Exporters commonly
// pass the whole triple through, so it is taken rather than refused.
func loadAverage(raw json.RawMessage) (float64, error) {
	var v float64
	if raw[0] == '[' {
		var a []*float64
		if err := json.Unmarshal(raw, &a); err != nil {
			if tooBig(err) {
				return 0, fmt.Errorf("%s out of range", clip(string(raw)))
			}
			return 0, errors.New("is not a number or an array of numbers")
		}
		if len(a) == 0 || len(a) > 3 || a[0] == nil {
			return 0, fmt.Errorf("%s: want a number or [1min, 5min, 15min]", clip(string(raw)))
		}
		v = *a[0]
	} else if err := json.Unmarshal(raw, &v); err != nil {
		if tooBig(err) {
			return 0, fmt.Errorf("%s out of range", clip(string(raw)))
		}
		return 0, fmt.Errorf("%s is not a number", clip(string(raw)))
	}
	if !finite(v) || v < 0 {
		return 0, fmt.Errorf("%v: want a finite number >= 0", v)
	}
	return math.Abs(v), nil
}

// jsonCount checks that a JSON number is a whole, non-negative count.
func jsonCount(v float64, max int64) (int64, error) {
	if !finite(v) || v < 0 || v != math.Trunc(v) {
		return 0, fmt.Errorf("%v: want a whole number >= 0", v)
	}
	if v > maxJSONInt || v > float64(max) {
		return 0, fmt.Errorf("%v out of range", v)
	}
	return int64(v), nil
}

// ParseBody extracts load figures from a probe response body, choosing the
// parser by content: a JSON content type (application/json, */*+json) or a
// body starting with '{' is parsed as JSON stats; a body whose first line is
// "Active connections: ..." as nginx stub_status. ok is false for bodies that
// are neither (a plain "OK" is normal: the server is up, it just does not
// report load), for JSON without load fields, and for malformed ones.
func ParseBody(contentType string, body []byte) (avail.Load, bool) {
	l, ok, err := parseBody(contentType, body)
	return l, ok && err == nil
}

// parseBody is ParseBody keeping the difference between "not a load body"
// (ok false, err nil) and "a load body, but malformed" (ok true, err set),
// which the prober reports as a "body" error.
func parseBody(contentType string, body []byte) (avail.Load, bool, error) {
	if len(body) > MaxBody {
		body = body[:MaxBody]
	}
	b := bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")) // UTF-8 BOM
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return avail.Load{}, false, nil
	}
	if isJSONType(contentType) || (len(b) > 0 && b[0] == '{') {
		l, err := ParseStats(b)
		if errors.Is(err, ErrNoLoad) {
			return avail.Load{}, false, nil
		}
		return l, true, err
	}
	if bytes.HasPrefix(b, []byte("Active connections:")) {
		l, err := ParseStubStatus(b)
		return l, true, err
	}
	return avail.Load{}, false, nil
}

func isJSONType(ct string) bool {
	if ct == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}
