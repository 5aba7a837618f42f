package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WriteSection replaces its own section and leaves the rest of the file as
// it was; without one it appends it (or puts it after the marker given).
func TestWriteSection(t *testing.T) {
	const begin, end = "<!-- x:begin -->", "<!-- x:end -->"
	one := begin + "\none\n" + end + "\n"
	two := begin + "\ntwo\n" + end + "\n"
	for _, tc := range []struct{ name, doc, after, want string }{
		{"appended", "# B\n\nbefore\n", "", "# B\n\nbefore\n\n" + one},
		{"replaced", "# B\n\n" + two + "after\n", "", "# B\n\n" + one + "after\n"},
		{"after a marker", "a\n<!-- y:end -->\nb\n", "<!-- y:end -->", "a\n<!-- y:end -->\n\n" + one + "b\n"},
		{"new file", "", "", one},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "b.md")
			if tc.doc != "" {
				if err := os.WriteFile(path, []byte(tc.doc), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteSection(path, one, begin, end, tc.after); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			if string(got) != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "b.md")
	if err := os.WriteFile(path, []byte(begin+"\nno end\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteSection(path, one, begin, end, ""); err == nil || !strings.Contains(err.Error(), "without") {
		t.Errorf("a section without its end marker: %v", err)
	}
}

func TestImageLink(t *testing.T) {
	if got := ImageLink("a plot", "/x/docs/img/p.png"); got != "![a plot](img/p.png)\n\n" {
		t.Errorf("got %q", got)
	}
	if ImageLink("a plot", "") != "" {
		t.Error("no plot: no link")
	}
}
