package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/anysched/anysched/internal/province/topology/topogen"
)

// Player timings.
const (
	// PlayerStall: media time standing still longer than this (wall clock)
	// is a stall. The player reads at the media's own rate (-re) and
	// reports every 0.2 s, so a healthy one never comes near it.
	PlayerStall = time.Second
	// PlayerHang: no media progress for this long and the harness kills
	// ffmpeg and asks the Anycast address again, as an STB's watchdog
	// would (ffmpeg's own timeouts cover a dead edge, not every hang).
	PlayerHang = 5 * time.Second
	// playerRetry is the pause before asking again after ffmpeg ended.
	playerRetry = 200 * time.Millisecond
	// playerErrorLines bounds the ffmpeg lines a report keeps.
	playerErrorLines = 100
)

// Player is ffmpeg playing a live channel in a city's client namespace
// through the Anycast address, started again through it whenever it ends
// (a dead edge: its playlist reloads fail) or hangs, until Stop.
type Player struct {
	city    int
	channel string
	start   time.Time
	cancel  context.CancelFunc
	done    chan struct{}

	mu        sync.Mutex
	runs      []PlayerRun
	stalls    int
	longest   time.Duration
	reconnect time.Duration // longest media gap across a reconnect
	lastMedia time.Time     // the last media progress, any run
	started   time.Duration // StartPlayer to the first media progress
	errs      []string
	stopped   time.Time
}

// PlayerRun is one ffmpeg process of a player.
type PlayerRun struct {
	Start      time.Time     // ffmpeg started: asked the Anycast address
	FirstMedia time.Time     // its media time first advanced (zero: never)
	LastMedia  time.Time     // ... and last
	End        time.Time     // zero while it runs
	Played     time.Duration // media time it output
	// Edge is the host:port its playlist and segments came from (after
	// the redirect); FirstSeq and LastSeq the sequence numbers of the
	// first and last segments it opened (-1: none).
	Edge              string
	FirstSeq, LastSeq int64
	// Exit is ffmpeg's exit status; -1 when the harness ended it (Stop,
	// or Hung: no media progress for PlayerHang).
	Exit int
	Hung bool
}

// PlayerReport is what a player saw.
type PlayerReport struct {
	City    int
	Channel string
	Wall    time.Duration // StartPlayer to Stop (to now while it plays)
	// StartTime is StartPlayer to the first media progress (the first
	// frame decoded); 0 if it never started.
	StartTime time.Duration
	Played    time.Duration // media time output by all runs
	// Stalls counts the times media stood still longer than PlayerStall
	// within a run (and at Stop); LongestStall is the longest.
	Stalls       int
	LongestStall time.Duration
	// Reconnects counts the runs after the first: ffmpeg ended or hung and
	// the player asked the Anycast address again. LongestReconnect is the
	// longest gap in media progress across one (the last progress of a run
	// to the first of a later one): what a viewer saw frozen.
	Reconnects       int
	LongestReconnect time.Duration
	// Errors are ffmpeg's warning and error lines (at most 100), each
	// prefixed with the time since StartPlayer.
	Errors []string
	Runs   []PlayerRun
}

// String is the report on one line, for logs.
func (r PlayerReport) String() string {
	var edges []string
	for _, run := range r.Runs {
		if run.Edge != "" && (len(edges) == 0 || edges[len(edges)-1] != run.Edge) {
			edges = append(edges, run.Edge)
		}
	}
	return fmt.Sprintf("city %d %s: start %v, played %v in %v, %d stalls (longest %v), %d reconnects (longest gap %v), %d errors, edges %s",
		r.City+1, r.Channel, r.StartTime.Round(time.Millisecond), r.Played.Round(100*time.Millisecond), r.Wall.Round(100*time.Millisecond),
		r.Stalls, r.LongestStall.Round(time.Millisecond), r.Reconnects, r.LongestReconnect.Round(time.Millisecond), len(r.Errors), strings.Join(edges, " -> "))
}

// StartPlayer starts a player in city i's client namespace playing the
// live channel (its path's first segment: /<channel>/index.m3u8 on the
// live service's hostname, with a viewer token when the lab runs QoE). It
// plays until Stop or ctx ends. Needs ffmpeg.
func (l *Lab) StartPlayer(ctx context.Context, i int, channel string) (*Player, error) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		return nil, errors.New("lab: players need ffmpeg (apt-get install ffmpeg)")
	}
	if i < 0 || i >= len(l.o.Cities) {
		return nil, fmt.Errorf("lab: no city %d", i)
	}
	if channel == "" || strings.ContainsAny(channel, "/?#") {
		return nil, fmt.Errorf("lab: channel %q is not a path segment", channel)
	}
	target := "http://" + ServiceIP.String() + "/" + channel + "/index.m3u8"
	if l.o.QoE {
		tok, err := l.probeToken()
		if err != nil {
			return nil, err
		}
		target += "?token=" + tok
	}
	return startPlayer(ctx, i, channel, "ip", "netns", "exec", l.nsName(fmt.Sprintf("c%d", i+1)),
		"ffmpeg", "-hide_banner", "-nostdin", "-loglevel", "repeat+level+info", "-nostats",
		"-progress", "pipe:1", "-stats_period", "0.2",
		"-rw_timeout", "2000000", // 2 s: a silent edge fails the run instead of hanging it
		"-headers", "Host: "+topogen.Hostname+"\r\n",
		"-re", "-i", target, "-f", "null", "-"), nil
}

// startPlayer runs the player's command (argv: ffmpeg, or ffmpeg in a
// namespace) until ctx ends or Stop.
func startPlayer(ctx context.Context, i int, channel string, argv ...string) *Player {
	ctx, cancel := context.WithCancel(ctx)
	p := &Player{city: i, channel: channel, start: time.Now(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			p.run(ctx, argv)
			select {
			case <-ctx.Done():
				return
			case <-time.After(playerRetry):
			}
		}
	}()
	return p
}

// Stop ends the player and returns its report. Calling it again returns
// the same report.
func (p *Player) Stop() PlayerReport {
	p.cancel()
	<-p.done
	p.mu.Lock()
	if p.stopped.IsZero() {
		p.stopped = time.Now()
	}
	p.mu.Unlock()
	return p.Report()
}

// Report is what the player saw so far (it keeps playing).
func (p *Player) Report() PlayerReport {
	p.mu.Lock()
	defer p.mu.Unlock()
	end := p.stopped
	if end.IsZero() {
		end = time.Now()
	}
	r := PlayerReport{City: p.city, Channel: p.channel, Wall: end.Sub(p.start), StartTime: p.started,
		Stalls: p.stalls, LongestStall: p.longest, LongestReconnect: p.reconnect,
		Errors: append([]string(nil), p.errs...), Runs: append([]PlayerRun(nil), p.runs...)}
	if len(p.runs) > 0 {
		r.Reconnects = len(p.runs) - 1
	}
	for _, run := range r.Runs {
		r.Played += run.Played
	}
	// Stopped while frozen: the stall it was in counts.
	if n := len(r.Runs); n > 0 && !p.stopped.IsZero() {
		last := r.Runs[n-1]
		if gap := last.End.Sub(last.LastMedia); !last.Hung && !last.LastMedia.IsZero() && gap > PlayerStall {
			r.Stalls++
			r.LongestStall = max(r.LongestStall, gap)
		}
	}
	return r
}

var (
	openingRE = regexp.MustCompile(`Opening '([^']+)' for reading`)
	segmentRE = regexp.MustCompile(`/seg([0-9]+)\.ts$`)
)

// run is one ffmpeg process: it reads the progress (stdout) and log
// (stderr) until ffmpeg exits, ctx ends or the media stops for PlayerHang.
func (p *Player) run(ctx context.Context, argv []string) {
	rctx, kill := context.WithCancel(ctx)
	defer kill()
	cmd := exec.CommandContext(rctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the lab's driver
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		p.fail(err)
		return
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		p.fail(err)
		return
	}
	p.mu.Lock()
	p.runs = append(p.runs, PlayerRun{Start: time.Now(), FirstSeq: -1, LastSeq: -1})
	k := len(p.runs) - 1
	p.mu.Unlock()
	if err := cmd.Start(); err != nil {
		p.fail(err)
		p.end(k, -1, false)
		return
	}
	logged := make(chan struct{})
	go func() { defer close(logged); p.readLog(k, stderr) }()
	hung := make(chan struct{})
	watched := make(chan struct{})
	go func() { // the watchdog
		defer close(watched)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case now := <-t.C:
				p.mu.Lock()
				run := p.runs[k]
				p.mu.Unlock()
				since := run.Start
				if !run.LastMedia.IsZero() {
					since = run.LastMedia
				}
				if now.Sub(since) > PlayerHang {
					close(hung)
					kill()
					return
				}
			}
		}
	}()
	p.readProgress(k, stdout)
	<-logged // before Wait, which closes the pipes
	err = cmd.Wait()
	kill()
	<-watched
	exit := 0
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil || isClosed(hung):
		exit = -1
	case errors.As(err, &ee):
		exit = ee.ExitCode()
	case err != nil:
		exit = -1
	}
	p.end(k, exit, isClosed(hung))
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// readProgress follows ffmpeg's -progress output: media time
// (out_time_us) moving forward is progress.
func (p *Player) readProgress(k int, r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "out_time_us=")
		if !ok {
			continue
		}
		us, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue // N/A before the first frame
		}
		p.progress(k, time.Duration(us)*time.Microsecond, time.Now())
	}
}

// progress records run k's media time at now.
func (p *Player) progress(k int, played time.Duration, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	run := &p.runs[k]
	if played <= run.Played {
		return
	}
	switch {
	case run.FirstMedia.IsZero():
		run.FirstMedia = now
		if p.lastMedia.IsZero() {
			p.started = now.Sub(p.start)
		} else {
			p.reconnect = max(p.reconnect, now.Sub(p.lastMedia))
		}
	case now.Sub(run.LastMedia) > PlayerStall:
		p.stalls++
		p.longest = max(p.longest, now.Sub(run.LastMedia))
	}
	run.LastMedia, run.Played, p.lastMedia = now, played, now
}

// readLog follows ffmpeg's log: the edge and segments it opens, and its
// warnings and errors.
func (p *Player) readLog(k int, r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if m := openingRE.FindStringSubmatch(line); m != nil {
			u, err := url.Parse(m[1])
			if err != nil || u.Hostname() == ServiceIP.String() {
				continue
			}
			p.mu.Lock()
			run := &p.runs[k]
			run.Edge = u.Host
			if s := segmentRE.FindStringSubmatch(u.Path); s != nil {
				n, _ := strconv.ParseInt(s[1], 10, 64)
				if run.FirstSeq < 0 {
					run.FirstSeq = n
				}
				run.LastSeq = n
			}
			p.mu.Unlock()
			continue
		}
		for _, level := range []string{"[warning]", "[error]", "[fatal]", "[panic]"} {
			if strings.Contains(line, level) {
				p.fail(errors.New(line))
				break
			}
		}
	}
}

// fail records an error line.
func (p *Player) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.errs) < playerErrorLines {
		p.errs = append(p.errs, fmt.Sprintf("+%.1fs %v", time.Since(p.start).Seconds(), err))
	}
}

// end records how run k ended.
func (p *Player) end(k, exit int, hung bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runs[k].End, p.runs[k].Exit, p.runs[k].Hung = time.Now(), exit, hung
}
