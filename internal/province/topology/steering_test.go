package topology_test

import (
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
)

func TestSteeringDefaultsAndOff(t *testing.T) {
	for _, c := range []struct {
		tail string
		want *topology.SteeringView
	}{
		{"", nil},
		{"    steering: {}\n", &topology.SteeringView{TTL: 10, Retry: 2, MovesPerSecond: 5, MoveBurst: 5, Pathways: 3}},
		{"    steering: {ttl_seconds: 1, moves_per_second: 0.5}\n", &topology.SteeringView{TTL: 1, Retry: 1, MovesPerSecond: 0.5, MoveBurst: 1, Pathways: 3}},
		{"    steering: {ttl_seconds: 30, retry_seconds: 3, moves_per_second: 20, move_burst: 5, pathways: 2}\n", &topology.SteeringView{TTL: 30, Retry: 3, MovesPerSecond: 20, MoveBurst: 5, Pathways: 2}},
	} {
		top, err := topology.Parse([]byte(validDoc + c.tail))
		if err != nil {
			t.Fatalf("%q: %v", c.tail, err)
		}
		s, err := topology.Compile(top, 1)
		if err != nil {
			t.Fatal(err)
		}
		got := s.Services[0].Steering
		if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("%q: got %+v, want %+v", c.tail, got, c.want)
		}
	}
}

func TestSteeringValidation(t *testing.T) {
	const svc = "services[0] (live)"
	for _, c := range []struct{ tail, want string }{
		{"steering: {ttl_seconds: 0, retry_seconds: 20}", svc + ".steering.retry_seconds: 20 is out of range [1, ttl_seconds 10]"},
		{"steering: {ttl_seconds: 7200}", svc + ".steering.ttl_seconds: 7200 is out of range [1, 3600]"},
		{"steering: {moves_per_second: -1}", svc + ".steering.moves_per_second: -1 is out of range (0, 10000]"},
		{"steering: {move_burst: -3}", svc + ".steering.move_burst: -3 is out of range"},
		{"steering: {pathways: 9}", svc + ".steering.pathways: 9 is out of range [1, 8]"},
		{"steering: {ttl: 5}", svc + ".steering.ttl: unknown field"},
	} {
		_, err := topology.Parse([]byte(validDoc + "    " + c.tail + "\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got:\n%v\nwant a line containing:\n%s", c.tail, err, c.want)
		}
	}
}

func TestSteeringDiff(t *testing.T) {
	a, err := topology.Parse([]byte(validDoc))
	if err != nil {
		t.Fatal(err)
	}
	b, err := topology.Parse([]byte(validDoc + "    steering: {moves_per_second: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	sec := topology.Diff(a, b).Section(topology.KindServices)
	want := "steering: (none) -> moves_per_second=2"
	if sec == nil || len(sec.Changed) != 1 || len(sec.Changed[0].Fields) != 1 || sec.Changed[0].Fields[0] != want {
		t.Fatalf("diff %+v\nwant %s", sec, want)
	}
}
