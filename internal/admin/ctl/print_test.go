package ctl

import (
	"bytes"
	"flag"
	"io"
	"testing"

	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestList(t *testing.T) {
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{nil, ""},
		{[]string{"a"}, "a"},
		{[]string{"a", "b"}, "a or b"},
		{[]string{"a", "b", "c"}, "a, b or c"},
	} {
		if got := orList(tc.words); got != tc.want {
			t.Errorf("orList(%q) = %q, want %q", tc.words, got, tc.want)
		}
	}
}

// Tables print one after another, a blank line between, each aligned on
// its own; a title goes above its header.
func TestWriteTables(t *testing.T) {
	a := newTable("NAME", "N")
	a.title = "two tables"
	a.add("short", 1)
	a.add("a-longer-name", 22.5)
	b := newTable("X", "YES")
	b.add("x", true)
	var out bytes.Buffer
	if err := writeTables(&out, a, b); err != nil {
		t.Fatal(err)
	}
	want := "two tables\n" +
		"NAME           N\n" +
		"short          1\n" +
		"a-longer-name  22.5\n" +
		"\n" +
		"X  YES\n" +
		"x  true\n"
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}

// API messages print with their .proto names and every field; the output
// is the same every time (protojson's own varies on purpose).
func TestWriteJSON(t *testing.T) {
	m := &pb.DrainEntry{Kind: "server", Name: "a<b>", At: timestamppb.New(t0)}
	want := "{\n  \"kind\": \"server\",\n  \"name\": \"a<b>\",\n  \"reason\": \"\",\n  \"at\": \"2026-11-30T04:00:00Z\",\n  \"from\": null,\n  \"until\": null,\n  \"state\": \"\",\n  \"forced\": false\n}\n"
	for range 5 {
		var out bytes.Buffer
		if err := writeJSON(&out, m); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Fatalf("got:\n%s\nwant:\n%s", out.String(), want)
		}
	}
	var out bytes.Buffer
	if err := writeJSON(&out, []serverRow{{Node: "n", Region: "r"}}); err != nil {
		t.Fatal(err)
	}
	if want := "[\n  {\n    \"node\": \"n\",\n    \"region\": \"r\",\n    \"name\": \"\",\n    \"address\": \"\",\n    \"capacity\": {}\n  }\n]\n"; out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}

// As YAML, a message has the fields and values of its JSON form, in block
// style.
func TestWriteYAML(t *testing.T) {
	m := &pb.StatusResponse{Revision: 7, Drains: []*pb.DrainEntry{{Kind: "server", Name: "a", At: timestamppb.New(t0)}}}
	var out bytes.Buffer
	if err := writeYAML(&out, m); err != nil {
		t.Fatal(err)
	}
	want := `revision: "7"
instances: []
regions: []
checkers: []
drains:
  - kind: server
    name: a
    reason: ""
    at: "2026-11-30T04:00:00Z"
    from: null
    until: null
    state: ""
    forced: false
center_id: ""
center_traffic: []
etcd: null
digest: ""
epoch: "0"
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestOutputFlag(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    string
		wantErr string
	}{
		{nil, "table", ""},
		{[]string{"-o", "json"}, "json", ""},
		{[]string{"-o", "yaml"}, "", `invalid value "yaml" for flag -o: want table or json`},
		{[]string{"-o", "JSON"}, "", `invalid value "JSON" for flag -o: want table or json`},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o := outputFlag(fs, formatTable, formatJSON)
		err := fs.Parse(tc.args)
		switch {
		case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || o.format != tc.want):
			t.Errorf("%v: -o %s (error %v), want %s", tc.args, o.format, err, tc.want)
		}
	}
}
