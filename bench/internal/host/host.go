// Package host is what the bench programs that run the namespace lab
// (bench/rollout, bench/province) read of the machine and write into the
// documentation: the machine's description and busy time, every
// process's CPU time, RSS and network namespace from /proc, the lab's
// namespaces, a section of a markdown file between its markers, and a
// grid of plots as a PNG.
package host

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/anysched/anysched/internal/testbed/lab"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// ClockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
const ClockTicks = 100

// Pct is ticks of CPU time over d as % of one core.
func Pct(ticks int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return 100 * float64(ticks) / ClockTicks / d.Seconds()
}

// Machine describes the host: CPU model, cores, memory, kernel.
func Machine() string {
	model, cores := "unknown CPU", 0
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "model name":
				model = strings.TrimSpace(v)
			case "processor":
				cores++
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		_, _ = fmt.Sscanf(strings.TrimPrefix(strings.SplitN(string(b), "\n", 2)[0], "MemTotal:"), "%d", &kb)
		mem = fmt.Sprintf(", %.0f GiB RAM", float64(kb)/(1<<20))
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return fmt.Sprintf("%s, %d cores%s, Linux %s", model, cores, mem, strings.TrimSpace(string(kernel)))
}

// LoadAvg is /proc/loadavg's first three fields.
func LoadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// MachineCPU is the whole machine's busy and total ticks (/proc/stat).
func MachineCPU() (busy, total int64) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	if !s.Scan() {
		return 0, 0
	}
	fields := strings.Fields(s.Text())[1:]
	for i, v := range fields {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i >= 8 { // guest time is already counted in user
			break
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

// Proc is one process as /proc shows it.
type Proc struct {
	Comm  string
	Nice  int
	Ticks int64  // utime+stime, all its threads
	RSS   int64  // bytes
	NetNS string // its network namespace, as /proc/<pid>/ns/net names it ("net:[4026532...]")
}

// Procs reads every process's CPU time, RSS and network namespace.
func Procs() map[int]Proc {
	out := map[int]Proc{}
	ents, _ := os.ReadDir("/proc")
	page := int64(os.Getpagesize())
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i, j := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if i < 0 || j < i {
			continue
		}
		f := strings.Fields(string(b[j+1:]))
		if len(f) < 22 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)  // field 14
		st, _ := strconv.ParseInt(f[12], 10, 64)  // field 15
		nice, _ := strconv.Atoi(f[16])            // field 19
		rss, _ := strconv.ParseInt(f[21], 10, 64) // field 24, pages
		ns, _ := os.Readlink("/proc/" + e.Name() + "/ns/net")
		out[pid] = Proc{Comm: string(b[i+1 : j]), Nice: nice, Ticks: ut + st, RSS: rss * page, NetNS: ns}
	}
	return out
}

// NetNS maps the network namespaces named with prefix ("ass-" for a lab
// of prefix ass), as /proc/<pid>/ns/net names them, to their names less
// the prefix ("ctr", "s1", ...).
func NetNS(prefix string) map[string]string {
	out := map[string]string{}
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		short, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		if fi, err := os.Stat("/run/netns/" + e.Name()); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				out[fmt.Sprintf("net:[%d]", st.Ino)] = short
			}
		}
	}
	return out
}

// ForeignNS counts the network namespaces not named with prefix (other
// engineers' labs on the machine).
func ForeignNS(prefix string) int {
	ents, _ := os.ReadDir("/run/netns")
	n := 0
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), prefix) {
			n++
		}
	}
	return n
}

// Sleep waits d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// WriteSection puts sec (which starts with begin and ends with end) into
// the markdown file at path: in place of the section between begin and
// end; without one, on the line after the marker after (when given and
// found), or at the end of the file.
func WriteSection(path, sec, begin, end, after string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	var out []byte
	if i := bytes.Index(old, []byte(begin)); i >= 0 {
		j := bytes.Index(old[i:], []byte(end))
		if j < 0 {
			return fmt.Errorf("%s: %s without %s", path, begin, end)
		}
		stop := i + j + len(end)
		if stop < len(old) && old[stop] == '\n' {
			stop++
		}
		out = append(append(append([]byte{}, old[:i]...), sec...), old[stop:]...)
	} else if k := bytes.Index(old, []byte(after)); after != "" && k >= 0 {
		at := k + len(after)
		if nl := bytes.IndexByte(old[at:], '\n'); nl >= 0 {
			at += nl + 1
		} else {
			old = append(old, '\n')
			at = len(old)
		}
		out = append(append(append(append([]byte{}, old[:at]...), '\n'), sec...), old[at:]...)
	} else {
		out = append([]byte{}, old...)
		if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n")) {
			out = append(out, '\n')
		}
		if len(out) > 0 {
			out = append(out, '\n')
		}
		out = append(out, sec...)
	}
	return os.WriteFile(path, out, 0o644)
}

// SavePNG draws plots, a grid of rows of the same length, aligned on one
// canvas of width x height and writes it to path as a PNG.
func SavePNG(plots [][]*plot.Plot, width, height vg.Length, path string) error {
	if len(plots) == 0 || len(plots[0]) == 0 {
		return fmt.Errorf("%s: no plots", path)
	}
	img := vgimg.New(width, height)
	dc := draw.New(img)
	t := draw.Tiles{Rows: len(plots), Cols: len(plots[0]), PadX: vg.Points(20), PadY: vg.Points(20), PadTop: vg.Points(10), PadBottom: vg.Points(10), PadLeft: vg.Points(10), PadRight: vg.Points(15)}
	canvases := plot.Align(plots, t, dc)
	for j := range plots {
		for i := range plots[j] {
			plots[j][i].Draw(canvases[j][i])
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Publish draws the plot at png (none when png is empty) and puts the
// section, made for that plot, into doc between begin and end (nowhere
// when doc is empty), saying where each went.
func Publish(png, doc, begin, end string, draw func(png string) error, section func(png string) string) error {
	if png != "" {
		if err := draw(png); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		fmt.Println("plot:", png)
	}
	if doc != "" {
		if err := WriteSection(doc, section(png), begin, end, ""); err != nil {
			return err
		}
		fmt.Println("section written to", doc)
	}
	return nil
}

// ImageLink is a markdown image of png for a page in docs/ (png's path
// from docs/ on), or "" without one.
func ImageLink(alt, png string) string {
	if png == "" {
		return ""
	}
	rel := png
	if i := strings.Index(png, "docs/"); i >= 0 {
		rel = png[i+len("docs/"):]
	}
	return fmt.Sprintf("![%s](%s)\n\n", alt, rel)
}

// Prepare checks what a lab bench needs: root, the commands on the PATH,
// the built binaries in bin (make build); it returns bin's absolute path
// and this program's (which runs again as the load generators).
func Prepare(bin string, commands, binaries []string) (absBin, self string, err error) {
	if os.Geteuid() != 0 {
		return "", "", errors.New("the lab needs root (network namespaces)")
	}
	for _, c := range commands {
		if _, err := exec.LookPath(c); err != nil {
			return "", "", fmt.Errorf("needs %s", c)
		}
	}
	if absBin, err = filepath.Abs(bin); err != nil {
		return "", "", err
	}
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(absBin, b)); err != nil {
			return "", "", fmt.Errorf("%s: run make build first", filepath.Join(absBin, b))
		}
	}
	self, err = os.Executable()
	return absBin, self, err
}

// Down tears a lab down and says what it left behind (lab.Leftovers), as
// an error if anything.
func Down(l *lab.Lab, prefix, dir string) error {
	fmt.Printf("\n== tearing the lab down\n")
	l.Down()
	if left := lab.Leftovers(prefix, dir); len(left) > 0 {
		return fmt.Errorf("left behind: %s", strings.Join(left, "; "))
	}
	fmt.Printf("  nothing left behind (no %s-* namespaces)\n", prefix)
	return nil
}

// ReadResults reads a results file a run saved (SaveResults) into v.
func ReadResults(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// SaveResults writes v to dir/results.json, for re-rendering with
// -results, and says where.
func SaveResults(dir string, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	path := filepath.Join(dir, "results.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		fmt.Println("results not saved:", err)
		return
	}
	fmt.Printf("\nresults saved in %s\n", path)
}

// Apply applies the lab's topology (dir/topology.yaml) through the
// center's admin API with bin/schedctl, run in the center's namespace,
// trying again until the center answers or within has passed; it returns
// schedctl's output.
func Apply(ctx context.Context, l *lab.Lab, bin, dir string, within time.Duration) (string, error) {
	for deadline := time.Now().Add(within); ; {
		argv := append([]string{"netns", "exec", l.NS("ctr"), filepath.Join(bin, "schedctl")}, l.SchedctlArgs()...)
		out, err := exec.CommandContext(ctx, "ip", append(argv, "apply", "--yes", "-f", filepath.Join(dir, "topology.yaml"))...).CombinedOutput()
		if err == nil {
			return string(out), nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return "", fmt.Errorf("apply: %v: %s", err, out)
		}
		Sleep(ctx, 300*time.Millisecond)
	}
}

// Ask sends one STB request and reads the answer: which scheduler gave it
// (X-Anysched-Instance) and the round trip; anything but a 302 is an
// error.
func Ask(client *http.Client, req *http.Request) (string, time.Duration, error) {
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return "", 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	lat := time.Since(t0)
	if resp.StatusCode != http.StatusFound {
		return "", 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.Header.Get("X-Anysched-Instance"), lat, nil
}

// Converge waits until each of the lab's cities is answered by want(i)
// twice in a row (lab.Request from its client namespace, every pause),
// for at most within in all.
func Converge(ctx context.Context, l *lab.Lab, cities []string, want func(i int) string, within, pause time.Duration) error {
	deadline := time.Now().Add(within)
	for i, c := range cities {
		for ok := 0; ok < 2; {
			inst, code, _ := l.Request(ctx, i)
			if code == http.StatusFound && inst == want(i) {
				ok++
				continue
			}
			ok = 0
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: want answers from %s, got %q (HTTP %d)", c, want(i), inst, code)
			}
			Sleep(ctx, pause)
		}
	}
	return nil
}
