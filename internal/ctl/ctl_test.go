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

	"github.com/anysched/anysched/internal/token"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

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

// schedctl token signs what the schedulers verify; bad use is a usage error.
func TestTokenCommand(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "k.key")
	if err := os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"token", "--key-id", "k1", "--secret-file", secret, "--sub", "v1", "--desired-kbps", "2500"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	v, err := token.NewVerifier([]token.Key{{ID: "k1", Secret: []byte("0123456789abcdef0123456789abcdef")}}, token.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.Verify(strings.TrimSpace(out.String()))
	if err != nil || c.Subject != "v1" || c.DesiredKbps != 2500 {
		t.Fatalf("token %q: %+v %v", out.String(), c, err)
	}
	if err := Run(context.Background(), []string{"token", "--key-id", "k1"}, io.Discard, io.Discard); !errors.Is(err, ErrUsage) {
		t.Fatalf("missing flags: %v", err)
	}
}

// TestTakeoverCountsEveryCenter: a drill counts what every central
// scheduler answered the city's STBs (the one it talks to live, the others
// from their registrations), from the earliest takeover to the latest answer.
func TestTakeoverCountsEveryCenter(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	at := func(s float64) *timestamppb.Timestamp {
		return timestamppb.New(t0.Add(time.Duration(s * float64(time.Second))))
	}
	traffic := func(n, failed uint64, run, last float64) []*pb.RegionTraffic {
		return []*pb.RegionTraffic{
			{ClientRegion: "hefei", Answered: 999, RunStart: at(-500), Last: at(run)}, // another city: not counted
			{ClientRegion: "wuhu", Answered: n, Failed: failed, RunStart: at(run), Last: at(last)},
		}
	}
	status := func(live, record []*pb.RegionTraffic) *pb.StatusResponse {
		return &pb.StatusResponse{CenterId: "center-1", CenterTraffic: live, Instances: []*pb.Instance{
			{Id: "center-1", Role: "central", Traffic: traffic(1, 0, -900, -900)}, // stale record: the live count wins
			{Id: "center-2", Role: "central", Traffic: record},
			{Id: "wuhu-1", Role: "regional", Region: "wuhu", Traffic: traffic(5000, 0, -900, 0)}, // not a center
		}}
	}
	var out bytes.Buffer
	f := &takeover{region: "wuhu", start: t0, out: &out,
		base: centerTraffic(status(traffic(10, 1, -100, -90), traffic(5, 0, -100, -95)), "wuhu")}
	f.observe(status(traffic(10, 1, -100, -90), traffic(5, 0, -100, -95))) // nothing new yet
	if len(f.cur) != 0 || out.Len() != 0 {
		t.Fatalf("no new answers, but: %v %q", f.cur, out.String())
	}
	f.observe(status(traffic(30, 1, 0.2, 3), traffic(5, 0, -100, -95)))
	f.observe(status(traffic(42, 2, 0.2, 4.5), traffic(25, 0, 0.1, 4.9))) // center-2's record comes later, with an earlier start
	f.summary()
	for _, want := range []string{
		"+  0.2s  the center (center-1) answered its first wuhu STB",
		"+  4.9s  the last answer of a center to a wuhu STB",
		"the centers (center-1 32, center-2 20) answered 52 requests of wuhu's STBs from +0.1s to +4.9s, 1 of them with an error",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	(&takeover{region: "wuhu", start: t0, out: &out}).summary()
	if !strings.Contains(out.String(), "no center answered") {
		t.Errorf("without traffic: %q", out.String())
	}
}
