package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The steps' section goes right after the modes' section, and replaces
// itself on the next run; the modes' section is left as it was.
func TestWriteDocAt(t *testing.T) {
	modes := docBegin + "\nmodes\n" + docEnd + "\n"
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"after the modes", "intro\n" + modes + "next\n", "intro\n" + modes + "\nS1\nnext\n"},
		{"modes at the end without a newline", "intro\n" + strings.TrimSuffix(modes, "\n"), "intro\n" + modes + "\nS1\n"},
		{"replaced", "intro\n" + modes + "\n" + stepsBegin + "\nold\n" + stepsEnd + "\nnext\n", "intro\n" + modes + "\nS1\nnext\n"},
		{"no modes: appended", "intro\n", "intro\n\nS1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "b.md")
			if err := os.WriteFile(path, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			sec := stepsBegin + "\nS1\n" + stepsEnd + "\n"
			if err := writeDocAt(path, sec, stepsBegin, stepsEnd, docEnd); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			want := strings.ReplaceAll(tc.want, "S1\n", sec)
			if string(got) != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// The modes' figures the steps' section compares with are read from the
// modes' table as section() writes it.
func TestModesFromDoc(t *testing.T) {
	r := &Results{Settings: Settings{Cities: 16, STBs: 4, Pause: 1e8, Duration: 3e10, Idle: 8e9}, Modes: []Mode{
		{K: 0, Requests: 100, Center: 100, CenterCPU: 11.4, CenterIdle: 1.0, P50: 11.7, CenterP50: 11.7},
		{K: 16, Requests: 100, Local: 100, CenterCPU: 4.8, CenterIdle: 5.2, CitiesCPU: 33.7, P50: 7.9, LocalP50: 7.9},
	}}
	d := modesFromDoc([]byte(section(r, "")))
	want := docModes{ok: true, cpu0: 11.4, idle0: 1.0, cpu16: 4.8, cities16: 33.7, p50at0: "11.7 ms", p50at16: "7.9 ms", window: "30s"}
	if d != want {
		t.Errorf("got %+v, want %+v", d, want)
	}
	if d := modesFromDoc([]byte("no section")); d.ok {
		t.Errorf("no section: got %+v", d)
	}
}
