package qoe

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestCBC10k compares qoe with CBC on 10,000 users and 200 servers (the
// density of TestScale100k, 810,000 binary variables) for seeds 1..QOE_SEEDS
// (default 1): set QOE_CBC=DIR. The LP files, CBC's logs and solutions go
// to DIR (a seed whose solution and log are there is not solved again);
// CBC gets 300 s of CPU (`nice -n 19`). Logs qoe's objective, bound and
// certified gap against CBC's best (re-evaluated in Go) and CBC's bound.
func TestCBC10k(t *testing.T) {
	dir := os.Getenv("QOE_CBC")
	if dir == "" {
		t.Skip("set QOE_CBC=DIR")
	}
	if _, err := exec.LookPath("cbc"); err != nil {
		t.Skip("cbc not installed")
	}
	seeds := 1
	if s, err := strconv.Atoi(os.Getenv("QOE_SEEDS")); err == nil && s > 0 {
		seeds = s
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for s := 1; s <= seeds; s++ {
		in := scaleInstance(rand.New(rand.NewPCG(uint64(s), 22)), 10000, 200)
		lp := filepath.Join(dir, fmt.Sprintf("scale10k-%d.lp", s))
		sol, logf := lp+".sol", lp+".log"
		if _, err := os.Stat(sol); err != nil {
			var buf bytes.Buffer
			if err := WriteLP(&buf, in); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(lp, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("nice", "-n", "19", "cbc", lp, "sec", "300", "solve", "solu", sol).CombinedOutput()
			if werr := os.WriteFile(logf, out, 0o644); werr != nil {
				t.Fatal(werr)
			}
			if err != nil {
				t.Fatalf("cbc: %v (log %s)", err, logf)
			}
		}
		data, err := os.ReadFile(sol)
		if err != nil {
			t.Fatal(err)
		}
		cobj, cfeas := -1.0, false
		if assign, err := ParseSolution(bytes.NewReader(data), in); err == nil {
			cobj, cfeas, _ = Evaluate(in, assign)
		}
		logData, _ := os.ReadFile(logf)
		status, cbound := "?", -1.0
		if m := regexp.MustCompile(`Result - (.*)`).FindSubmatch(logData); m != nil {
			status = string(m[1])
		}
		if m := regexp.MustCompile(`(?m)^(?:Upper|Lower) bound:\s+(\S+)`).FindSubmatch(logData); m != nil {
			cbound, _ = strconv.ParseFloat(string(m[1]), 64)
			if cbound < 0 {
				cbound = -cbound
			}
		}
		for _, l := range []Lagrangian{{}, scaleSolver(false)} {
			start := time.Now()
			res, err := l.Solve(context.Background(), fresh(in))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("seed %d (Tol %g): qoe %.2f bound %.2f gap %.3f%% iters %d in %v; CBC %q: best %.2f (feasible %v) bound %.2f; qoe vs CBC best %+.3f%%",
				s, l.Tol, res.Objective, res.Bound, 100*res.Gap(), res.Iter, time.Since(start), status, cobj, cfeas, cbound, 100*(res.Objective-cobj)/cobj)
		}
	}
}
