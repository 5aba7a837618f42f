package docs_test

import (
	"strings"
	"testing"
)

// reloadedFiles are the files a daemon reads again while it runs (the
// certificate store and the GeoIP database follow their files and SIGHUP);
// every other key and certificate is read at start only.
var reloadedFiles = []string{"https.certificates", "geoip.database"}

// TestReloadedFilesAgree: operations.md and security.md say the same of
// which files are read again while a daemon runs. They once disagreed
// (security.md: no daemon reloads a key file; operations.md: the HTTPS
// certificates reload on change and SIGHUP, which is what happens).
func TestReloadedFilesAgree(t *testing.T) {
	sec, ops := read(t, "security.md"), read(t, "operations.md")
	rows := func(doc, key string) []string {
		var out []string
		for _, l := range strings.Split(doc, "\n") {
			if strings.HasPrefix(l, "| `"+key) {
				out = append(out, l)
			}
		}
		return out
	}
	for _, key := range reloadedFiles {
		for name, doc := range map[string]string{"security.md": sec, "operations.md": ops} {
			rs := rows(doc, key)
			if len(rs) == 0 {
				t.Errorf("%s has no table row for %s", name, key)
			}
			for _, r := range rs {
				if !strings.Contains(r, "SIGHUP") {
					t.Errorf("%s: the row of %s does not say it is read again on SIGHUP: %s", name, key, r)
				}
			}
		}
	}
	for _, claim := range []string{"no daemon watches", "no daemon reloads", "reloads nothing"} {
		for name, doc := range map[string]string{"security.md": sec, "operations.md": ops} {
			if strings.Contains(doc, claim) {
				t.Errorf("%s says %q, but %v are read again while a daemon runs", name, claim, reloadedFiles)
			}
		}
	}
}
