package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// procStat is one process's parent and CPU time, from /proc/PID/stat.
type procStat struct {
	ppid int
	cpu  time.Duration // user + system
}

// readStat parses /proc/PID/stat (times in clock ticks of 1/100 s, Linux's
// USER_HZ).
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(string(b))
}

func parseStat(s string) (procStat, error) {
	// The command name, in parentheses, may itself hold spaces and ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, errors.New("/proc stat: unexpected format")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return procStat{}, errors.New("/proc stat: unexpected format")
	}
	ppid, err0 := strconv.Atoi(f[1])
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err0 != nil || err1 != nil || err2 != nil {
		return procStat{}, errors.New("/proc stat: unexpected format")
	}
	return procStat{ppid: ppid, cpu: time.Duration(utime+stime) * 10 * time.Millisecond}, nil
}

// treeCPU is the CPU time so far of process root and of every live
// descendant (nginx's worker is a child of its master).
func treeCPU(root int) (time.Duration, error) {
	own, err := readStat(root)
	if err != nil {
		return 0, err
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	stats := map[int]procStat{}
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != root {
			if st, err := readStat(pid); err == nil {
				stats[pid] = st
			}
		}
	}
	return own.cpu + descendantsCPU(root, stats), nil
}

// descendantsCPU sums the CPU time of root's descendants in stats.
func descendantsCPU(root int, stats map[int]procStat) time.Duration {
	children := map[int][]int{}
	for pid, st := range stats {
		children[st.ppid] = append(children[st.ppid], pid)
	}
	var sum time.Duration
	seen := map[int]bool{root: true}
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !seen[c] {
				seen[c] = true
				sum += stats[c].cpu
				queue = append(queue, c)
			}
		}
	}
	return sum
}

// cpuTimes are one CPU's time so far, in USER_HZ ticks, from /proc/stat:
// busy (anything but idle), tasks (processes, user and system: busy less
// interrupts and steal) and total.
type cpuTimes struct{ busy, tasks, total uint64 }

// readCPUTimes returns the times of the given CPUs.
func readCPUTimes(cpus ...int) ([]cpuTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil, err
	}
	return parseCPUTimes(string(b), cpus...)
}

func parseCPUTimes(stat string, cpus ...int) ([]cpuTimes, error) {
	out := make([]cpuTimes, len(cpus))
	found := make([]bool, len(cpus))
	for _, l := range strings.Split(stat, "\n") {
		f := strings.Fields(l)
		if len(f) < 5 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		n, err := strconv.Atoi(f[0][3:])
		if err != nil {
			continue // the "cpu" line sums all CPUs
		}
		for i, c := range cpus {
			if c != n {
				continue
			}
			// user nice system idle iowait irq softirq steal (guest time
			// is already counted in user).
			var t cpuTimes
			for j, v := range f[1:min(len(f), 9)] {
				x, err := strconv.ParseUint(v, 10, 64)
				if err != nil || x > 1<<56 { // beyond any uptime; and the sums cannot overflow
					return nil, fmt.Errorf("/proc/stat %s: bad time %q", f[0], v)
				}
				t.total += x
				if j != 3 && j != 4 { // idle, iowait
					t.busy += x
				}
				if j <= 2 { // user, nice, system
					t.tasks += x
				}
			}
			out[i], found[i] = t, true
		}
	}
	for i, ok := range found {
		if !ok {
			return nil, fmt.Errorf("/proc/stat has no cpu%d", cpus[i])
		}
	}
	return out, nil
}

// busyShare is the share of the time between a and b that the CPU was
// busy (0 when no time passed).
func busyShare(a, b cpuTimes) float64 {
	if b.total <= a.total || b.busy < a.busy {
		return 0
	}
	return float64(b.busy-a.busy) / float64(b.total-a.total)
}

// tasksShare is the share of the time between a and b that the CPU ran
// processes.
func tasksShare(a, b cpuTimes) float64 {
	if b.total <= a.total || b.tasks < a.tasks {
		return 0
	}
	return float64(b.tasks-a.tasks) / float64(b.total-a.total)
}
