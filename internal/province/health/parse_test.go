package health

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/health/avail"
)

func TestParseStubStatusSamples(t *testing.T) {
	// Bodies captured from real nginx (testdata/stub_status/*.txt).
	want := map[string]avail.Load{
		"nginx-1.22.1.txt": {Connections: 1, Requests: 4},
		"busy.txt":         {Connections: 291, Requests: 31070465},
	}
	for name, w := range want {
		body, err := os.ReadFile(filepath.Join("testdata", "stub_status", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseStubStatus(body)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got != w {
			t.Errorf("%s: got %+v, want %+v", name, got, w)
		}
		if l, ok := ParseBody("text/plain", body); !ok || l != w {
			t.Errorf("%s: ParseBody = %+v, %v", name, l, ok)
		}
	}
}

func TestParseStubStatus(t *testing.T) {
	const ok3 = "Active connections: 291\nserver accepts handled requests\n 16630948 16630948 31070465\n"
	tests := []struct {
		name    string
		body    string
		want    avail.Load
		wantErr string // substring; "" = success
	}{
		{"doc sample", ok3 + "Reading: 6 Writing: 179 Waiting: 106\n", avail.Load{Connections: 291, Requests: 31070465}, ""},
		{"no reading line", ok3, avail.Load{Connections: 291, Requests: 31070465}, ""},
		{"no final newline", strings.TrimSuffix(ok3, "\n"), avail.Load{Connections: 291, Requests: 31070465}, ""},
		{"crlf", strings.ReplaceAll(ok3+"Reading: 6 Writing: 179 Waiting: 106\n", "\n", "\r\n"), avail.Load{Connections: 291, Requests: 31070465}, ""},
		{"tabs and spaces", "Active connections:\t7 \nserver  accepts handled requests\n\t1  2 3\t\n", avail.Load{Connections: 7, Requests: 3}, ""},
		{"extra trailing lines ignored", ok3 + "Reading: 0 Writing: 1 Waiting: 0\nsomething: new\n", avail.Load{Connections: 291, Requests: 31070465}, ""},
		{"zeros", "Active connections: 0\nserver accepts handled requests\n0 0 0\n", avail.Load{}, ""},
		{"max int64 requests", "Active connections: 1\nserver accepts handled requests\n1 1 9223372036854775807\n", avail.Load{Connections: 1, Requests: 9223372036854775807}, ""},

		{"empty", "", avail.Load{}, "line 1"},
		{"OK body", "OK", avail.Load{}, "line 1"},
		{"html", "<html><body>Active connections: 3</body></html>", avail.Load{}, "line 1"},
		{"negative active", "Active connections: -1\nserver accepts handled requests\n1 1 1\n", avail.Load{}, "not a non-negative integer"},
		{"plus sign", "Active connections: +1\nserver accepts handled requests\n1 1 1\n", avail.Load{}, "not a non-negative integer"},
		{"non-number active", "Active connections: many\nserver accepts handled requests\n1 1 1\n", avail.Load{}, "active connections"},
		{"float active", "Active connections: 1.5\nserver accepts handled requests\n1 1 1\n", avail.Load{}, "active connections"},
		{"missing header", "Active connections: 1\n1 1 1\n", avail.Load{}, "line 2"},
		{"missing counters", "Active connections: 1\nserver accepts handled requests\n", avail.Load{}, "line 3"},
		{"two counters", "Active connections: 1\nserver accepts handled requests\n1 1\n", avail.Load{}, "three counters"},
		{"four counters", "Active connections: 1\nserver accepts handled requests\n1 1 1 1\n", avail.Load{}, "three counters"},
		{"overflow", "Active connections: 1\nserver accepts handled requests\n1 1 9223372036854775808\n", avail.Load{}, "out of range"},
		{"huge active", "Active connections: 99999999999999999999999\nserver accepts handled requests\n1 1 1\n", avail.Load{}, "out of range"},
		{"bad reading line", ok3 + "Reading: x Writing: 1 Waiting: 0\n", avail.Load{}, "Reading"},
		{"short reading line", ok3 + "Reading: 1 Writing: 1\n", avail.Load{}, "line 4"},
		{"trailing word", "Active connections: 1 x\nserver accepts handled requests\n1 1 1\n", avail.Load{}, "line 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStubStatus([]byte(tc.body))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
				}
				if !strings.HasPrefix(err.Error(), "stub_status: ") {
					t.Errorf("err %q does not say which parser", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseStubStatusBounded(t *testing.T) {
	// A valid status followed by megabytes of junk: only the first MaxBody
	// bytes are looked at, and error messages stay short.
	body := "Active connections: 2\nserver accepts handled requests\n1 1 9\nReading: 0 Writing: 1 Waiting: 1\n" + strings.Repeat("x", 1<<20)
	if got, err := ParseStubStatus([]byte(body)); err != nil || got.Requests != 9 {
		t.Fatalf("got %+v, %v", got, err)
	}
	_, err := ParseStubStatus([]byte(strings.Repeat("y", 1<<20)))
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("err = %.300v", err)
	}
}

func TestParseStats(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    avail.Load
		wantErr string // substring; "" = success
	}{
		{"doc sample", `{"cpu": 0.42, "bandwidth_mbps": 812.5, "connections": 1200}`, avail.Load{CPU: 0.42, BandwidthMbps: 812.5, Connections: 1200}, ""},
		{"unknown fields ignored", `{"cpu":0.1,"hostname":"edge-1","disks":[1,2],"nested":{"cpu":9}}`, avail.Load{CPU: 0.1}, ""},
		{"requests", `{"requests": 31070465, "connections": 3}`, avail.Load{Connections: 3, Requests: 31070465}, ""},
		{"cpu bounds", `{"cpu": 1, "bandwidth_mbps": 0}`, avail.Load{CPU: 1}, ""},
		{"cpu_percent", `{"cpu_percent": 42}`, avail.Load{CPU: 0.42}, ""},
		{"cpu wins over cpu_percent", `{"cpu": 0.5, "cpu_percent": 90}`, avail.Load{CPU: 0.5}, ""},
		{"null is absent", `{"cpu": null, "connections": 5}`, avail.Load{Connections: 5}, ""},
		{"whole float connections", `{"connections": 12.0}`, avail.Load{Connections: 12}, ""},
		{"exponent", `{"bandwidth_mbps": 1e3}`, avail.Load{BandwidthMbps: 1000}, ""},
		{"whitespace", " \n\t{\"cpu\":0.2}\n", avail.Load{CPU: 0.2}, ""},
		{"memory", `{"memory": 0.73}`, avail.Load{Memory: 0.73}, ""},
		{"memory bounds", `{"memory": 1, "cpu": 0}`, avail.Load{Memory: 1}, ""},
		{"load_avg", `{"load_avg": 3.25}`, avail.Load{LoadAvg: 3.25}, ""},
		{"load", `{"load": 12}`, avail.Load{LoadAvg: 12}, ""},
		{"load triple", `{"load": [1.5, 1.25, 0.75]}`, avail.Load{LoadAvg: 1.5}, ""},
		{"load_avg single", `{"load_avg": [2]}`, avail.Load{LoadAvg: 2}, ""},
		{"load_avg wins over load", `{"load": 9, "load_avg": 1}`, avail.Load{LoadAvg: 1}, ""},
		{"null load_avg leaves load", `{"load": 9, "load_avg": null}`, avail.Load{LoadAvg: 9}, ""},
		{"zero load", `{"load_avg": 0}`, avail.Load{}, ""},
		{"all figures", `{"cpu": 0.5, "memory": 0.6, "load_avg": 7, "bandwidth_mbps": 100, "connections": 3}`,
			avail.Load{CPU: 0.5, Memory: 0.6, LoadAvg: 7, BandwidthMbps: 100, Connections: 3}, ""},

		{"no load fields", `{"status":"ok"}`, avail.Load{}, "no load figures"},
		{"empty object", `{}`, avail.Load{}, "no load figures"},
		{"array", `[1,2]`, avail.Load{}, "no load figures"},
		{"cpu as percent", `{"cpu": 42}`, avail.Load{}, "cpu 42 out of range [0,1]"},
		{"negative cpu", `{"cpu": -0.1}`, avail.Load{}, "out of range"},
		{"cpu_percent over 100", `{"cpu_percent": 101}`, avail.Load{}, "cpu_percent"},
		{"negative bandwidth", `{"bandwidth_mbps": -1}`, avail.Load{}, "bandwidth_mbps"},
		{"fractional connections", `{"connections": 1.5}`, avail.Load{}, "connections 1.5: want a whole number"},
		{"negative connections", `{"connections": -3}`, avail.Load{}, "connections"},
		{"huge connections", `{"connections": 1e300}`, avail.Load{}, "out of range"},
		{"requests beyond 2^53", `{"requests": 1e17}`, avail.Load{}, "out of range"},
		{"overflowing number", `{"bandwidth_mbps": 1e999}`, avail.Load{}, "stats:"},
		{"string value", `{"cpu": "0.4"}`, avail.Load{}, "stats:"},
		{"NaN literal", `{"cpu": NaN}`, avail.Load{}, "stats:"},
		{"truncated", `{"cpu": 0.4`, avail.Load{}, "stats:"},
		{"trailing garbage", `{"cpu": 0.4} x`, avail.Load{}, "stats:"},
		{"two objects", `{"cpu": 0.4}{"cpu": 0.5}`, avail.Load{}, "stats:"},
		{"empty", ``, avail.Load{}, "empty"},
		{"not json", `OK`, avail.Load{}, "not a JSON object"},
		{"memory as percent", `{"memory": 73}`, avail.Load{}, "memory 73 out of range [0,1]"},
		{"negative memory", `{"memory": -0.1}`, avail.Load{}, "memory -0.1 out of range"},
		{"memory string", `{"memory": "0.5"}`, avail.Load{}, "stats:"},
		{"negative load", `{"load_avg": -1}`, avail.Load{}, "load_avg -1: want a finite number >= 0"},
		{"negative load in triple", `{"load": [-1, 0, 0]}`, avail.Load{}, "load -1: want a finite number >= 0"},
		{"overflowing load", `{"load": 1e999}`, avail.Load{}, "load 1e999 out of range"},
		{"overflowing load in triple", `{"load": [1e999, 1, 1]}`, avail.Load{}, "load [1e999, 1, 1] out of range"},
		{"load string", `{"load_avg": "high"}`, avail.Load{}, `load_avg "high" is not a number`},
		{"load object", `{"load": {"1m": 1}}`, avail.Load{}, "load {"},
		{"empty load array", `{"load": []}`, avail.Load{}, "load []: want a number or [1min, 5min, 15min]"},
		{"long load array", `{"load": [1, 2, 3, 4]}`, avail.Load{}, "want a number or [1min, 5min, 15min]"},
		{"null in load array", `{"load": [null, 1, 1]}`, avail.Load{}, "want a number or [1min, 5min, 15min]"},
		{"strings in load array", `{"load": ["1", "2"]}`, avail.Load{}, "load is not a number or an array of numbers"},
		{"bad load_avg not replaced by load", `{"load": 1, "load_avg": -2}`, avail.Load{}, "load_avg -2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStats([]byte(tc.body))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseStatsBounded(t *testing.T) {
	// Valid JSON padded past MaxBody is cut at MaxBody and fails as truncated.
	body := `{"cpu": 0.5, "pad": "` + strings.Repeat("a", MaxBody) + `"}`
	if _, err := ParseStats([]byte(body)); err == nil {
		t.Fatal("a stats body longer than MaxBody parsed")
	}
	body = `{"cpu": 0.5, "pad": "` + strings.Repeat("a", MaxBody-100) + `"}`
	if got, err := ParseStats([]byte(body)); err != nil || got.CPU != 0.5 {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestParseBody(t *testing.T) {
	stub := "Active connections: 3 \nserver accepts handled requests\n 10 10 20 \nReading: 0 Writing: 1 Waiting: 2 \n"
	tests := []struct {
		name, ct, body string
		want           avail.Load
		ok             bool
		malformed      bool // parseBody reports a recognised but broken body
	}{
		{"stub_status text/plain", "text/plain", stub, avail.Load{Connections: 3, Requests: 20}, true, false},
		{"stub_status no type", "", stub, avail.Load{Connections: 3, Requests: 20}, true, false},
		{"stub_status leading blank", "text/plain", "\r\n " + stub, avail.Load{Connections: 3, Requests: 20}, true, false},
		{"json by type", "application/json; charset=utf-8", `{"cpu":0.5}`, avail.Load{CPU: 0.5}, true, false},
		{"json by suffix type", "application/vnd.anysched.stats+json", `{"connections":4}`, avail.Load{Connections: 4}, true, false},
		{"json by brace", "text/plain", `{"bandwidth_mbps":100}`, avail.Load{BandwidthMbps: 100}, true, false},
		{"json with BOM", "", "\xef\xbb\xbf{\"cpu\":0.25}", avail.Load{CPU: 0.25}, true, false},
		{"json memory and load only", "application/json", `{"memory":0.5,"load":[2,1,1]}`, avail.Load{Memory: 0.5, LoadAvg: 2}, true, false},
		{"json bad memory", "application/json", `{"memory":50}`, avail.Load{}, false, true},
		{"plain OK", "text/plain", "OK", avail.Load{}, false, false},
		{"nginx return ok", "application/octet-stream", "ok", avail.Load{}, false, false},
		{"empty", "", "", avail.Load{}, false, false},
		{"empty json", "application/json", "", avail.Load{}, false, false},
		{"html", "text/html", "<html>up</html>", avail.Load{}, false, false},
		{"json health without load", "application/json", `{"status":"pass"}`, avail.Load{}, false, false},
		{"json string", "application/json", `"ok"`, avail.Load{}, false, false},
		{"bad type ignored", "not a / type;;", "OK", avail.Load{}, false, false},
		{"broken json", "application/json", `{"cpu": 7}`, avail.Load{}, false, true},
		{"json type, not json", "application/json", `OK`, avail.Load{}, false, true},
		{"broken stub_status", "text/plain", "Active connections: x\n", avail.Load{}, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseBody(tc.ct, []byte(tc.body))
			if ok != tc.ok || got != tc.want {
				t.Fatalf("ParseBody = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
			_, recognised, err := parseBody(tc.ct, []byte(tc.body))
			if (err != nil) != tc.malformed || (tc.malformed && !recognised) {
				t.Fatalf("parseBody: recognised %v, err %v; want malformed %v", recognised, err, tc.malformed)
			}
		})
	}
}
