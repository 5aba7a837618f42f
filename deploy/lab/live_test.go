package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/testbed/stbload"
)

func sec(city string, at, req, failed int, by map[string]int) stbload.Second {
	return stbload.Second{City: city, At: at, Requests: req, Failures: failed, AnsweredBy: by}
}

// TestLive: a second is printed once every city has reported it, in order,
// and the drilled city's timeline groups seconds by who answered.
func TestLive(t *testing.T) {
	var out bytes.Buffer
	lv := newLive(&out, []string{"hefei", "wuhu"}, 1)
	lv.add(sec("hefei", 0, 10, 0, map[string]int{"hefei-1": 10}))
	lv.add(sec("hefei", 1, 10, 0, map[string]int{"hefei-1": 10}))
	if out.Len() != 0 {
		t.Fatalf("printed before wuhu reported: %q", out.String())
	}
	wuhu := []stbload.Second{
		sec("wuhu", 0, 10, 0, map[string]int{"wuhu-1": 10}),
		sec("wuhu", 1, 10, 0, map[string]int{"wuhu-1": 10}),
		sec("wuhu", 2, 10, 1, map[string]int{"wuhu-1": 3, "center": 6}),
		sec("wuhu", 3, 10, 0, map[string]int{"center": 10}),
		sec("wuhu", 4, 10, 0, map[string]int{"center": 10}),
		sec("wuhu", 5, 10, 0, map[string]int{"wuhu-1": 10}),
	}
	for _, s := range wuhu {
		lv.add(s)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "+  0s   hefei 10 ok [hefei-1]   wuhu 10 ok [wuhu-1]") {
		t.Fatalf("after two complete seconds: %q", out.String())
	}
	lv.flush() // hefei never reports 2..5: those lines still come, with 0 for it
	lines = strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 6 || !strings.Contains(lines[2], "wuhu 10, 1 failed [center 6, wuhu-1 3]") || !strings.Contains(lines[2], "hefei 0 ok []") {
		t.Fatalf("after flush: %q", out.String())
	}
	want := []string{
		"+0s..+1s", "wuhu-1", "20 requests, 0 failed",
		"+2s", "center 6, wuhu-1 3", "10 requests, 1 failed",
		"+3s..+4s", "center", "20 requests, 0 failed",
		"+5s", "wuhu-1", "10 requests, 0 failed",
	}
	tl := strings.Split(strings.TrimSpace(lv.timeline("wuhu")), "\n")
	if len(tl) != 4 {
		t.Fatalf("timeline:\n%s", lv.timeline("wuhu"))
	}
	for i, l := range tl {
		for _, w := range want[3*i : 3*i+3] {
			if !strings.Contains(l, w) {
				t.Errorf("timeline line %d %q lacks %q", i, l, w)
			}
		}
	}
}

func TestLiveEvery(t *testing.T) {
	var out bytes.Buffer
	lv := newLive(&out, []string{"hefei"}, 5)
	for k := range 12 {
		lv.add(sec("hefei", k, 1, 0, map[string]int{"hefei-1": 1}))
	}
	lv.flush()
	if got := strings.Count(out.String(), "\n"); got != 3 { // seconds 0, 5, 10
		t.Fatalf("%d lines: %q", got, out.String())
	}
}

// TestLiveAddsGenerators: the IPv4 and the IPv6 STBs of one city report the
// same second separately; the live line and the timeline count both.
func TestLiveAddsGenerators(t *testing.T) {
	var out strings.Builder
	lv := newLive(&out, []string{"wuhu"}, 1)
	lv.gens = 2
	lv.add(sec("wuhu", 0, 10, 0, map[string]int{"wuhu-1": 10}))
	if out.Len() != 0 {
		t.Fatalf("printed before the second generator reported:\n%s", out.String())
	}
	lv.add(sec("wuhu", 0, 6, 1, map[string]int{"wuhu-1": 3, "center": 2}))
	lv.flush()
	if got := out.String(); !strings.Contains(got, "wuhu 16, 1 failed [center 2, wuhu-1 13]") {
		t.Fatalf("live line:\n%s", got)
	}
}
