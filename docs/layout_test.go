package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLayoutNamesEveryPackage checks that design.md's Layout section names
// every package under internal/, so the map a newcomer reads first does not
// fall behind the tree. A package is named by its path in backticks; one
// nested in another's directory may be named by the tail from its parent
// (`etcdserver/embedcfg`), and the testbed's by their own names.
func TestLayoutNamesEveryPackage(t *testing.T) {
	doc := read(t, "design.md")
	start := strings.Index(doc, "\n## Layout\n")
	if start < 0 {
		t.Fatal("design.md has no Layout section")
	}
	layout := doc[start+1:]
	if end := strings.Index(layout[len("## Layout"):], "\n## "); end >= 0 {
		layout = layout[:len("## Layout")+end]
	}
	err := filepath.WalkDir("../internal", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || d.Name() == "testdata" {
			return err
		}
		if !hasGoCode(t, path) {
			return nil
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, "../"))
		names := []string{rel, filepath.Base(filepath.Dir(rel)) + "/" + filepath.Base(rel)}
		if strings.HasPrefix(rel, "internal/testbed/") {
			names = append(names, filepath.Base(rel))
		}
		for _, n := range names {
			if strings.Contains(layout, "`"+n+"`") {
				return nil
			}
		}
		t.Errorf("design.md's Layout does not name %s (write `%s` in its row)", rel, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// hasGoCode reports whether dir holds a Go file, tests included: a
// directory that only groups packages needs no row of its own.
func hasGoCode(t *testing.T, dir string) bool {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".go") {
			return true
		}
	}
	return false
}
