package lab

import (
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/tunlink"
)

// TestLinkDelays: real city pairs of anhui-cities.csv (each city to the
// capital), their great-circle distances and the one-way delays of the
// formula 0.2 ms + km × 1.5 / 200 km/ms.
func TestLinkDelays(t *testing.T) {
	for _, c := range []struct {
		city  string
		km    float64
		delay time.Duration
	}{
		{"hefei", 0, 200 * time.Microsecond}, // the capital: the fixed part only
		{"luan", 67.9, 710 * time.Microsecond},
		{"huainan", 93.1, 900 * time.Microsecond},
		{"wuhu", 125.1, 1140 * time.Microsecond},
		{"bengbu", 123.2, 1120 * time.Microsecond},
		{"anqing", 143.2, 1270 * time.Microsecond},
		{"huaibei", 241.3, 2010 * time.Microsecond},
		{"huangshan", 257.5, 2130 * time.Microsecond},
		{"bozhou", 263.3, 2170 * time.Microsecond}, // the farthest
	} {
		got := LinkDelays(Options{Cities: []string{c.city}, DistanceDelays: true})[0]
		if math.Abs(got.DistanceKm-c.km) > 0.1 || got.Delay != c.delay {
			t.Errorf("hefei-%s: %.1f km, %s; want %.1f km, %s", c.city, got.DistanceKm, got.Delay, c.km, c.delay)
		}
	}
	// Without DistanceDelays: half the fixed round trip on each end.
	if d := LinkDelays(Options{Cities: []string{"wuhu"}, Delay: 10 * time.Millisecond})[0].Delay; d != 5*time.Millisecond {
		t.Errorf("fixed 10ms round trip: %s per end", d)
	}
	if s := FormatDelays(LinkDelays(Options{Cities: []string{"hefei", "wuhu"}, DistanceDelays: true})); s != "hefei 0.20ms (0 km), wuhu 1.14ms (125 km)" {
		t.Errorf("FormatDelays: %q", s)
	}
}

func TestLinkDelayFormula(t *testing.T) {
	for km, want := range map[float64]time.Duration{0: 200 * time.Microsecond, 100: 950 * time.Microsecond, 200: 1700 * time.Microsecond, 1000: 7700 * time.Microsecond} {
		if got := LinkDelay(km); got != want {
			t.Errorf("%v km: %s, want %s", km, got, want)
		}
	}
}

func TestNetemCommand(t *testing.T) {
	got := netemCommand("asl-r2", "core", 1140*time.Microsecond)
	want := []string{"ip", "netns", "exec", "asl-r2", "tc", "qdisc", "add", "dev", "core", "root", "netem", "delay", "1140us"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// TestPrivilegedLinkDelays builds a one-city lab's network only (no
// daemons) with distance delays and checks the link's delay: netem on both
// ends where the kernel has it, otherwise a TUN link delayed by the lab;
// either way a TCP connect across it takes a round trip of twice the
// one-way delay.
func TestPrivilegedLinkDelays(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	if _, err := exec.LookPath("tc"); err != nil {
		t.Skip("needs tc")
	}
	const prefix = "asn"
	Cleanup(prefix)
	noNetem := !netemAvailable(prefix)
	o := Options{Prefix: prefix, Cities: []string{"huangshan"}, DistanceDelays: true, Dir: t.TempDir()}
	l := &Lab{o: o, procs: map[string]*Proc{}, delays: LinkDelays(o)}
	defer l.Down()
	if err := l.network(); err != nil {
		t.Fatal(err)
	}
	if l.NoNetem != noNetem {
		t.Fatalf("the lab says NoNetem=%v, the probe %v", l.NoNetem, noNetem)
	}
	for _, end := range [][2]string{{"r1", "core"}, {"core", "city1"}} {
		if noNetem {
			b, _ := exec.Command("ip", "-n", l.nsName(end[0]), "-d", "link", "show", "dev", end[1]).Output()
			if !strings.Contains(string(b), "tun") {
				t.Errorf("%s %s: not a TUN link: %s", end[0], end[1], b)
			}
			continue
		}
		b, _ := exec.Command("ip", "netns", "exec", l.nsName(end[0]), "tc", "qdisc", "show", "dev", end[1]).Output()
		if !strings.Contains(string(b), "netem") || !strings.Contains(string(b), "delay") {
			t.Errorf("%s %s: no netem delay: %s", end[0], end[1], b)
		}
	}
	want := l.delays[0].Delay // 2.13 ms
	rtt, _, err := tunlink.ConnectRTT(l.nsName("r1"), l.nsName("core"), "10.100.1.1:7002", 5)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("one-way delay %s, TCP connect round trip %s (netem: %v)", want, rtt, !noNetem)
	if rtt < 2*want || rtt > 2*want+3*time.Millisecond {
		t.Errorf("round trip %s, want about %s", rtt, 2*want)
	}
}

func TestAllCities(t *testing.T) {
	got := AllCities()
	if len(got) != 16 || got[0] != Capital || !slices.Contains(got, "bozhou") {
		t.Fatalf("AllCities() = %v, want the 16 cities, %s first", got, Capital)
	}
}
