package topology_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// FuzzDecodeTopology feeds arbitrary bytes to the decoder and the validator.
// They must never panic, every rejection must carry field errors, and a
// document that parses must survive the store's JSON round trip (and the YAML
// rendering `schedctl get` prints) and still compile to the same snapshot.
//
// Seeds: testdata/fuzz/FuzzDecodeTopology plus the documents of compile_test.go.
//
//	go test ./internal/province/topology -run '^$' -fuzz FuzzDecodeTopology -fuzztime 60s
func FuzzDecodeTopology(f *testing.F) {
	f.Add([]byte(validDoc))
	f.Add([]byte(lookupDoc))
	f.Add([]byte(validDoc + rightsTail))
	f.Fuzz(func(t *testing.T, data []byte) {
		top, err := topology.Decode(data)
		if err != nil {
			requireFieldErrors(t, "Decode", err)
			return
		}
		if err := topology.Validate(top); err != nil {
			requireFieldErrors(t, "Validate", err)
			return
		}
		// Parse would have succeeded.
		want, err := topology.Compile(top, 1)
		if err != nil {
			t.Fatalf("Validate accepted but Compile failed: %v", err)
		}
		js, err := top.EncodeJSON()
		if err != nil {
			t.Fatalf("EncodeJSON of a valid document: %v", err)
		}
		back, err := topology.DecodeJSON(js)
		if err != nil {
			t.Fatalf("DecodeJSON of EncodeJSON output: %v\n%s", err, js)
		}
		got, err := topology.Compile(back, 1)
		if err != nil {
			t.Fatalf("JSON round trip no longer compiles: %v\n%s", err, js)
		}
		if got.Counts() != want.Counts() {
			t.Fatalf("JSON round trip changed the counts: %+v -> %+v", want.Counts(), got.Counts())
		}
		if js2, err := back.EncodeJSON(); err != nil || !bytes.Equal(js, js2) {
			t.Fatalf("JSON round trip is not stable (%v):\n%s\n%s", err, js, js2)
		}
		y, err := top.YAML()
		if err != nil {
			t.Fatalf("YAML of a valid document: %v", err)
		}
		if _, err := topology.Parse(y); err != nil {
			t.Fatalf("YAML rendering does not parse: %v\n%s", err, y)
		}
	})
}

func requireFieldErrors(t *testing.T, what string, err error) {
	t.Helper()
	errs, ok := yamlstrict.AsErrors(err)
	if !ok || len(errs) == 0 {
		t.Fatalf("%s error without field errors: %v", what, err)
	}
	for _, e := range errs {
		if e.Msg == "" {
			t.Fatalf("%s: field error at %q without a message", what, e.Path)
		}
	}
}

// TestFuzzSeeds keeps the committed corpus honest: seeds named valid-* parse,
// every other seed is rejected.
func TestFuzzSeeds(t *testing.T) {
	files, err := filepath.Glob("testdata/fuzz/FuzzDecodeTopology/*")
	if err != nil || len(files) < 5 {
		t.Fatalf("corpus: %d files, %v", len(files), err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		header, lit, _ := strings.Cut(strings.TrimSpace(string(raw)), "\n")
		body, ok := strings.CutPrefix(lit, "[]byte(")
		body, ok2 := strings.CutSuffix(body, ")")
		data, err := strconv.Unquote(body)
		if header != "go test fuzz v1" || !ok || !ok2 || err != nil {
			t.Errorf("%s: not a one-value []byte corpus file (%v)", f, err)
			continue
		}
		_, err = topology.Parse([]byte(data))
		if valid := strings.HasPrefix(filepath.Base(f), "valid-"); valid != (err == nil) {
			t.Errorf("%s: Parse error = %v", f, err)
		}
	}
}
