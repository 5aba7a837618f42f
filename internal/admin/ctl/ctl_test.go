package ctl

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/wiring/config"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files from what the commands print")

// t0 is when every test's clock starts.
var t0 = time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)

// cmdCase is one schedctl command line run against the fake admin API.
type cmdCase struct {
	name  string
	args  []string           // the command line after "schedctl"
	stdin string             // for -f -
	rpc   map[string]handler // the fake's answers by method; none: Unimplemented
	// rpcAt, if set, gives the answers instead, from the time of the call
	// (the drills poll a province that changes).
	rpcAt   func(now func() time.Time) map[string]handler
	want    string                     // stdout, exactly
	golden  string                     // or: stdout is testdata/<golden>, exactly
	mask    func(stdout string) string // applied to stdout before comparing
	wantErr string                     // the error, exactly, or up to a final "..."; "" for none
	usage   bool                       // the error is a usage error (exit code 2)
	sent    []call                     // the requests, in order; nil for none
	// sentMore: sent is only the first requests, more may follow (polls).
	sentMore bool
}

// testEnv is schedctl's surroundings in a test: the fake admin API (what
// dial returns), a clock at t0, and no environment variables.
func testEnv(f *fakeAdmin, out, errOut io.Writer) *env {
	return &env{
		stdin: strings.NewReader(""), out: out, errOut: errOut,
		clock:  &fakeClock{now: t0},
		loc:    time.UTC,
		getenv: func(string) string { return "" },
		dial:   func(globals) (pb.AdminClient, io.Closer, error) { return f, io.NopCloser(nil), nil },
	}
}

func runCases(t *testing.T, cases []cmdCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeAdmin{handlers: c.rpc}
			var out, errOut bytes.Buffer
			e := testEnv(f, &out, &errOut)
			e.stdin = strings.NewReader(c.stdin)
			if c.rpcAt != nil {
				f.handlers = c.rpcAt(e.clock.Now)
			}
			err := run(context.Background(), c.args, e)
			checkErr(t, err, c.wantErr, c.usage)
			got := out.String()
			if c.mask != nil {
				got = c.mask(got)
			}
			want := c.want
			if c.golden != "" {
				want = golden(t, c.golden, got)
			}
			if got != want {
				t.Errorf("stdout:\n%s\nwant:\n%s", got, want)
			}
			sent := f.sent()
			if c.sentMore && len(sent) > len(c.sent) {
				sent = sent[:len(c.sent)]
			}
			checkSent(t, sent, c.sent)
		})
	}
}

func checkErr(t *testing.T, err error, want string, usage bool) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("error %q, want none", err)
	case want == "":
	case err == nil:
		t.Fatalf("no error, want %q", want)
	case strings.HasSuffix(want, "..."): // the rest is another package's words
		if !strings.HasPrefix(err.Error(), strings.TrimSuffix(want, "...")) {
			t.Errorf("error:\n%s\nwant:\n%s", err, want)
		}
	case err.Error() != want:
		t.Errorf("error:\n%s\nwant:\n%s", err, want)
	}
	if err != nil && errors.Is(err, ErrUsage) != usage {
		t.Errorf("errors.Is(%q, ErrUsage) = %v, want %v", err, !usage, usage)
	}
}

func checkSent(t *testing.T, got, want []call) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d calls, want %d:\n%s", len(got), len(want), callsText(got))
		return
	}
	for i := range got {
		if got[i].method != want[i].method || !proto.Equal(got[i].req, want[i].req) {
			t.Errorf("call %d: %s, want %s", i, callsText(got[i:i+1]), callsText(want[i:i+1]))
		}
	}
}

func callsText(cs []call) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.method + " {" + prototext.MarshalOptions{}.Format(c.req) + "}\n")
	}
	return b.String()
}

// golden is testdata/name, written from got first with -update.
func golden(t *testing.T, name, got string) string {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// badRequest is a gRPC error as the center rejects a topology: a message
// and one field violation per problem.
func badRequest(msg string, fields ...string) handler {
	br := &errdetails.BadRequest{}
	for i := 0; i+1 < len(fields); i += 2 {
		br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: fields[i], Description: fields[i+1]})
	}
	st, err := status.New(codes.InvalidArgument, msg).WithDetails(br)
	if err != nil {
		panic(err)
	}
	return func(int, proto.Message) (proto.Message, error) { return nil, st.Err() }
}

// TestRoot: the global flags, the command table and usage, and the one
// form of every error.
func TestRoot(t *testing.T) {
	runCases(t, []cmdCase{
		{name: "no command", args: nil, wantErr: "usage error", usage: true},
		{name: "only global flags", args: []string{"--server", "x:1"}, wantErr: "usage error", usage: true},
		{name: "unknown command", args: []string{"frob"}, wantErr: `schedctl: unknown command "frob"`, usage: true},
		{name: "unknown global flag", args: []string{"--sever", "x:1", "status"}, wantErr: "schedctl: flag provided but not defined: -sever", usage: true},
		{name: "bad timeout", args: []string{"--timeout", "soon", "status"}, wantErr: `schedctl: invalid value "soon" for flag -timeout: parse error`, usage: true},
		{name: "command flag", args: []string{"status", "--watch"}, wantErr: "schedctl status: flag provided but not defined: -watch", usage: true},
		{name: "api error", args: []string{"status"}, rpc: map[string]handler{"Status": fail(codes.PermissionDenied, "no client certificate")},
			wantErr: "schedctl status: permission denied: no client certificate", sent: []call{{method: "Status", req: &pb.StatusRequest{}}}},
		{name: "unavailable", args: []string{"status"}, rpc: map[string]handler{"Status": fail(codes.Unavailable, "connection refused")},
			wantErr: "schedctl status: connection refused\n(is the central scheduler running and reachable? see --server)", sent: []call{{method: "Status", req: &pb.StatusRequest{}}}},
		{name: "field violations", args: []string{"status"}, rpc: map[string]handler{"Status": badRequest("3 problems", "a.b", "bad", "", "... and 2 more")},
			wantErr: "schedctl status: 3 problems\n  a.b: bad\n  ... and 2 more", sent: []call{{method: "Status", req: &pb.StatusRequest{}}}},
	})
}

// The usage lists every command; a command's mistakes print its synopsis
// and flags; a usage error that is not the bare ErrUsage is printed by main
// as is, so it carries the command's name.
func TestUsageText(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string // in stderr
	}{
		{nil, []string{"Usage:\n  schedctl [global flags] apply -f FILE", "  schedctl [global flags] drill etcd-loss", "\n  schedctl token --key-id", "  schedctl version\n", "Global flags, before the command (--server defaults to $ANYSCHED_SERVER, then 127.0.0.1:9090):\n", "-server address"}},
		{[]string{"frob"}, []string{"Usage:\n", "-tls-ca string"}},
		{[]string{"apply", "--bogus"}, []string{"usage: schedctl [global flags] apply -f FILE [--yes] [--dry-run]", "-base-revision int"}},
		{[]string{"drill", "failover", "--bogus"}, []string{"usage: schedctl [global flags] drill failover", "\n       schedctl [global flags] drill etcd-loss", "-no-watch"}},
		{[]string{"token", "--bogus"}, []string{"usage: schedctl token --key-id ID", "-secret-file string"}},
		{[]string{"status", "-o"}, []string{"usage: schedctl [global flags] status [-o table|yaml|json]\n  -o format\n    \toutput format: table, yaml or json (default table)\n"}},
	} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), tc.args, testEnv(&fakeAdmin{}, &out, &errOut))
		if !errors.Is(err, ErrUsage) || out.Len() != 0 {
			t.Errorf("%v: error %v, stdout %q; want a usage error and no output", tc.args, err, out.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut.String(), w) {
				t.Errorf("%v: stderr lacks %q:\n%s", tc.args, w, errOut.String())
			}
		}
	}
}

// The global flags reach dial; --server defaults to ANYSCHED_SERVER, then
// to the center's default address; offline commands do not dial.
func TestGlobals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		envvar string
		want   *globals // nil: no dial
	}{
		{"default", []string{"status"}, "", &globals{server: "127.0.0.1:9090", timeout: time.Minute}},
		{"env", []string{"status"}, "center:9090", &globals{server: "center:9090", timeout: time.Minute}},
		{"flag beats env", []string{"--server", "c2:9090", "status"}, "center:9090", &globals{server: "c2:9090", timeout: time.Minute}},
		{"tls", []string{"--tls-ca", "ca.pem", "--tls-cert", "c.pem", "--tls-key", "c.key", "--tls-server-name", "center", "--timeout", "5s", "status"}, "",
			&globals{server: "127.0.0.1:9090", timeout: 5 * time.Second, tls: config.ClientTLS{CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "c.key", ServerName: "center"}}},
		{"token is offline", []string{"token", "--key-id", "k"}, "", nil},
		{"version is offline", []string{"version"}, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *globals
			e := testEnv(&fakeAdmin{handlers: map[string]handler{"Status": reply(&pb.StatusResponse{})}}, io.Discard, io.Discard)
			e.getenv = func(k string) string {
				if k == "ANYSCHED_SERVER" {
					return tc.envvar
				}
				return ""
			}
			inner := e.dial
			e.dial = func(g globals) (pb.AdminClient, io.Closer, error) { got = &g; return inner(g) }
			_ = run(context.Background(), tc.args, e)
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Errorf("dialed with %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A dial failure is an error of schedctl's, not a usage error; the real
// dial checks the TLS files before any connection.
func TestDialError(t *testing.T) {
	e := testEnv(nil, io.Discard, io.Discard)
	e.dial = dial
	missing := filepath.Join(t.TempDir(), "ca.pem")
	err := run(context.Background(), []string{"--tls-ca", missing, "status"}, e)
	want := "schedctl: TLS: CA: open " + missing + ": no such file or directory"
	if err == nil || err.Error() != want || errors.Is(err, ErrUsage) {
		t.Fatalf("error %v, want %q", err, want)
	}
	if _, conn, err := dial(globals{server: "127.0.0.1:1"}); err != nil {
		t.Fatalf("dial without TLS: %v", err) // lazy: no connection yet
	} else {
		conn.Close()
	}
}

// Every command runs under --timeout (60 s unless given); a drill under an
// hour unless --timeout is given, as it lasts as long as it was asked to.
func TestTimeout(t *testing.T) {
	drill := map[string]handler{"Status": reply(&pb.StatusResponse{}), "Drill": reply(&pb.DrillResponse{Until: nil})}
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{[]string{"status"}, time.Minute},
		{[]string{"--timeout", "5s", "status"}, 5 * time.Second},
		{[]string{"drill", "failover", "--region", "wuhu"}, drillTimeout},
		{[]string{"--timeout", "2m", "drill", "failover", "--region", "wuhu"}, 2 * time.Minute},
	} {
		f := &fakeAdmin{handlers: drill}
		before := time.Now()
		if err := run(context.Background(), tc.args, testEnv(f, io.Discard, io.Discard)); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		after := time.Now()
		for _, c := range f.sent() {
			if c.deadline.Before(before.Add(tc.want)) || c.deadline.After(after.Add(tc.want)) {
				t.Errorf("%v: %s's deadline in %s, want %s", tc.args, c.method, c.deadline.Sub(before), tc.want)
			}
		}
	}
}

// TestErrorCode: an API error keeps its code through the rendering.
func TestErrorCode(t *testing.T) {
	f := &fakeAdmin{handlers: map[string]handler{"Status": badRequest("bad", "x", "y")}}
	err := run(context.Background(), []string{"status"}, testEnv(f, io.Discard, io.Discard))
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("status.Code(%q) = %s, want InvalidArgument", err, status.Code(err))
	}
}

func TestFlagSet(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--timeout", "5s", "drill"}, true},
		{[]string{"drill"}, false},
		{[]string{"--server", "x:1", "drill"}, false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Duration("timeout", time.Minute, "")
		fs.String("server", "", "")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if got := flagSet(fs, "timeout"); got != tc.want {
			t.Errorf("%v: flagSet = %v, want %v", tc.args, got, tc.want)
		}
	}
}

// Run is schedctl with the real surroundings: an offline command needs
// nothing else.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"version"}, &out, io.Discard); err != nil || !strings.HasPrefix(out.String(), "schedctl ") {
		t.Fatalf("Run version: %q, %v", out.String(), err)
	}
}

func TestWallClock(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	if err := (wallClock{}).Sleep(ctx, 0); err != nil {
		t.Errorf("Sleep(0) = %v", err)
	}
	cancel()
	if err := (wallClock{}).Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep after cancel = %v, want context.Canceled", err)
	}
}
