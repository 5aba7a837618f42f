package lab_test

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/lab"
	"github.com/anysched/anysched/internal/testbed/wait"
)

// BenchmarkPrivilegedConvergence measures, in the namespace province, over
// 10 runs each: process crash (kill -9) -> the center answers the city's
// STBs; frozen process (SIGSTOP; the watchdog, 800 ms, kills it before the
// hold time, 3 s) -> the center answers;
// planned stop (SIGTERM) under a request loop -> failed requests; restart ->
// the city answers again. Run as root with -benchtime 1x.
func BenchmarkPrivilegedConvergence(b *testing.B) {
	for b.Loop() {
		convergence(b, 10)
	}
}

func convergence(b *testing.B, runs int) {
	l := province(b, "asb", []string{"hefei"}, nil)
	city := lab.PrimaryID("hefei")
	answeredBy(b, l, 0, city, 60*time.Second)
	var crash, frozen, recovery []time.Duration
	var failed, retried, total int64
	restart := func() {
		if err := l.Restart(city); err != nil {
			b.Fatal(err)
		}
		recovery = append(recovery, answeredBy(b, l, 0, city, 30*time.Second))
	}
	for range runs {
		p := l.Proc(city)
		p.Signal(syscall.SIGKILL)
		crash = append(crash, answeredBy(b, l, 0, lab.CenterID, 15*time.Second))
		p.Wait(5 * time.Second)
		restart()

		p = l.Proc(city)
		p.Signal(syscall.SIGSTOP)
		frozen = append(frozen, answeredBy(b, l, 0, lab.CenterID, 15*time.Second))
		p.Signal(syscall.SIGKILL) // the watchdog's, or (had it not fired) a frozen process is not coming back by itself
		p.Signal(syscall.SIGCONT)
		p.Wait(5 * time.Second)
		restart()

		begin := time.Now()
		st := loop(b, l, 0, 0)
		st.waitAnswers(b, city, 3, begin, wait.DefaultTimeout)
		p = l.Proc(city)
		p.Signal(syscall.SIGTERM)
		p.Wait(15 * time.Second)
		st.waitAnswers(b, lab.CenterID, 3, begin, wait.DefaultTimeout)
		st.stop()
		n, r, f := st.counts()
		failed, retried, total = failed+int64(f), retried+int64(r), total+int64(n)
		restart()
	}
	report := func(name string, ds []time.Duration) {
		slices.Sort(ds)
		b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, name+"-p50-ms")
		b.ReportMetric(float64(ds[len(ds)-1].Microseconds())/1000, name+"-max-ms")
	}
	report("crash", crash)
	report("frozen", frozen)
	report("recovery", recovery)
	b.ReportMetric(float64(failed), "planned-stop-failed")
	b.ReportMetric(float64(retried), "planned-stop-retried")
	b.ReportMetric(float64(total), "planned-stop-requests")
}
