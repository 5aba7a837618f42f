package lab_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/lab"
	"github.com/anysched/anysched/internal/testbed/wait"
)

// Bounds of TestPrivilegedPlayers.
const (
	playerStartBound     = 5 * time.Second  // StartPlayer to the first frame: redirect, playlist, three segments
	playerStallBound     = 2 * time.Second  // no stall longer, while the edges are well
	playerReconnectBound = 10 * time.Second // a killed edge to the first frame from another one
)

// TestPrivilegedPlayers: a real player (ffmpeg) per city plays its channel
// through the Anycast redirect: it starts within a bound, its media time
// follows the wall clock over a moving live window, it does not stall; and
// when the edge it plays from is killed it asks the Anycast address again
// and plays from another edge within a bound, while the other city's
// player does not notice.
func TestPrivilegedPlayers(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("needs ffmpeg (scripts/install-deps.sh)")
	}
	cities := []string{"hefei", "wuhu"}
	l := provinceWith(t, "asj", lab.Options{Cities: cities, Edges: true})
	for i, c := range cities {
		answeredBy(t, l, i, lab.PrimaryID(c), 60*time.Second)
		// The checkers have found the city's edges up.
		wait.ForErr(t, fmt.Sprintf("city %d redirected to its edges", i+1), 30*time.Second, func() error {
			loc, err := l.Redirect(context.Background(), i)
			if _, ok := l.EdgeAt(loc); !ok || !strings.Contains(loc, fmt.Sprintf("//10.%d.4.", i+1)) {
				return fmt.Errorf("redirected to %q: %v", loc, err)
			}
			return nil
		})
	}
	ctx := context.Background()
	var players []*lab.Player
	for i, ch := range []string{"ch1", "ch2"} {
		p, err := l.StartPlayer(ctx, i, ch)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Stop() })
		players = append(players, p)
	}

	// About 15 s of play from the edges as they are.
	const play = 15 * time.Second
	if !wait.Until(play+playerStartBound+10*time.Second, func() bool {
		for _, p := range players {
			if p.Report().Played < play {
				return false
			}
		}
		return true
	}) {
		for _, p := range players {
			r := p.Report()
			t.Errorf("not 15 s played: %v\nerrors: %s\nruns: %+v", r, strings.Join(r.Errors, "\n"), r.Runs)
		}
		t.FailNow()
	}
	for _, p := range players {
		r := p.Report()
		t.Logf("steady: %v", r)
		run := r.Runs[len(r.Runs)-1]
		switch {
		case r.StartTime == 0 || r.StartTime > playerStartBound:
			t.Errorf("city %d: started after %v, want within %v", r.City+1, r.StartTime, playerStartBound)
		case r.Reconnects != 0 || len(r.Errors) != 0:
			t.Errorf("city %d: %d reconnects, errors %q", r.City+1, r.Reconnects, r.Errors)
		case r.LongestStall > playerStallBound:
			t.Errorf("city %d: stalled %d times, the longest %v", r.City+1, r.Stalls, r.LongestStall)
		}
		// Media time follows the wall clock (the player reads at the
		// media's rate), from a live window that moved a segment a second.
		wall := run.LastMedia.Sub(run.FirstMedia)
		if d := run.Played - wall; d < -1500*time.Millisecond || d > 1500*time.Millisecond {
			t.Errorf("city %d: played %v in %v of wall clock", r.City+1, run.Played, wall)
		}
		if moved := run.LastSeq - run.FirstSeq; float64(moved) < 0.8*wall.Seconds()-1 {
			t.Errorf("city %d: segments %d..%d in %v", r.City+1, run.FirstSeq, run.LastSeq, wall)
		}
		if _, ok := l.EdgeAt("http://" + run.Edge); !ok || !strings.HasPrefix(run.Edge, fmt.Sprintf("10.%d.4.", r.City+1)) {
			t.Errorf("city %d: played from %q, not one of its edges", r.City+1, run.Edge)
		}
	}
	if t.Failed() {
		return
	}

	// Kill the edge the first city's player plays from.
	before := players[0].Report()
	playing := before.Runs[len(before.Runs)-1].Edge
	victim, _ := l.EdgeAt("http://" + playing)
	killed := time.Now()
	proc := l.Proc(victim)
	if err := proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	proc.Wait(5 * time.Second)
	var back lab.PlayerRun
	wait.ForErr(t, "the player back on another edge", 2*playerReconnectBound, func() error {
		r := players[0].Report()
		for _, run := range r.Runs {
			if run.Start.After(killed) && !run.FirstMedia.IsZero() {
				back = run
				return nil
			}
		}
		return fmt.Errorf("%v", r)
	})
	reconnect := back.FirstMedia.Sub(killed)
	if reconnect > playerReconnectBound || back.Edge == playing {
		t.Errorf("after %s was killed: playing again after %v from %s", victim, reconnect, back.Edge)
	}
	// It plays on from there.
	wait.For(t, "3 s played after the reconnect", 10*time.Second, func() bool {
		r := players[0].Report()
		last := r.Runs[len(r.Runs)-1]
		return last.Start.After(killed) && last.Played >= 3*time.Second
	})

	rs := []lab.PlayerReport{players[0].Stop(), players[1].Stop()}
	for _, r := range rs {
		t.Logf("final: %v", r)
	}
	failed := 0
	for _, run := range rs[0].Runs {
		if run.FirstMedia.IsZero() {
			failed++
		}
	}
	t.Logf("city 1 killed %s at +%.1fs: playing again after %v from %s (%d reconnects, %d of them to no media; media frozen %v)",
		victim, before.Wall.Seconds(), reconnect.Round(time.Millisecond), back.Edge, rs[0].Reconnects, failed, rs[0].LongestReconnect.Round(time.Millisecond))
	if rs[0].Reconnects == 0 || rs[0].LongestReconnect > playerReconnectBound {
		t.Errorf("city 1: %d reconnects, media frozen %v at most", rs[0].Reconnects, rs[0].LongestReconnect)
	}
	// The other city's player did not notice.
	if r := rs[1]; r.Reconnects != 0 || r.LongestStall > playerStallBound || len(r.Errors) != 0 {
		t.Errorf("city 2: %v; errors %q", r, r.Errors)
	}
}
