package yamlstrict_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// TestDecodePartial: the values that decode are set even when others fail;
// a failing field keeps what it held, a list with a failing element too
// (without it the others would move to indices no error names), and the
// errors are Decode's.
func TestDecodePartial(t *testing.T) {
	doc := "name: kept\nport: eighty\nnam: x\nread_timeout: 3s\ntimeouts: {read: 1s, write: soon}\nitems: [{b: 1}, {b: two}, 7, {b: 4}]\nlimits: {a: 1, b: x}\nmatrix: [[1, 2], [x]]\nsubs: {s: {b: 5, tags: [a]}}\n"
	c := config{Port: 8080, Timeouts: timeouts{Write: time.Minute}, Items: []item{{B: 9}}, Matrix: [][]int{{1}}}
	err := yamlstrict.DecodePartial([]byte(doc), &c)
	errs, ok := yamlstrict.AsErrors(err)
	if !ok {
		t.Fatalf("DecodePartial: %v, want field errors", err)
	}
	expect(t, errs, "port: invalid value", "nam: unknown field", "timeouts.write: invalid value", "items[1].b: invalid value", "items[2]: expected a mapping", "limits.b: invalid value", "matrix[1][0]: invalid value")
	want := config{Name: "kept", Port: 8080, ReadTimeout: 3 * time.Second, Timeouts: timeouts{Read: time.Second, Write: time.Minute},
		Items: []item{{B: 9}}, Matrix: [][]int{{1}}, Limits: map[string]int{"a": 1}, Subs: map[string]item{"s": {B: 5, Tags: []string{"a"}}}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", c, want)
	}
	// Decode sets nothing on a problem.
	var d config
	if err := yamlstrict.Decode([]byte(doc), &d); err == nil || !reflect.DeepEqual(d, config{}) {
		t.Errorf("Decode: %v, %+v: want an error and nothing set", err, d)
	}
	// Nothing to decode: the document itself is wrong.
	for _, bad := range []string{"", "[1, 2]\n", "a: [\n"} {
		var e config
		if err := yamlstrict.DecodePartial([]byte(bad), &e); err == nil || !reflect.DeepEqual(e, config{}) {
			t.Errorf("DecodePartial(%q): %v, %+v", bad, err, e)
		}
	}
}

type outer struct {
	HTTP struct {
		Listen         string   `yaml:"listen"`
		TrustedProxies []string `yaml:"trusted_proxies"`
	} `yaml:"http"`
	Log struct {
		Level string `yaml:"level"`
	} `yaml:"log"`
	Region string `yaml:"region"`
}

// TestSuggestions: an unknown key gets the nearest key of its mapping, or,
// when none is close, the nearest key elsewhere by its full path (trusted_proxy at the top level:
// http.trusted_proxies).
func TestSuggestions(t *testing.T) {
	for doc, want := range map[string]string{
		"http:\n  trusted_proxy: [10.0.0.1]\n": `http.trusted_proxy: unknown field (did you mean "trusted_proxies"?)`,
		"trusted_proxy: [10.0.0.1]\n":          `trusted_proxy: unknown field (did you mean "http.trusted_proxies"?)`,
		"level: debug\n":                       `level: unknown field (did you mean "log.level"?)`,
		"regoin: hefei\n":                      `regoin: unknown field (did you mean "region"?)`,
		"http:\n  region: x\n":                 `http.region: unknown field (did you mean "region"?)`,
		"colour: red\n":                        "colour: unknown field",
	} {
		var o outer
		err := yamlstrict.Decode([]byte(doc), &o)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: %v, want %s", doc, err, want)
		}
		if strings.HasSuffix(want, "unknown field") && strings.Contains(err.Error(), "did you mean") {
			t.Errorf("%q: %v: a suggestion for an unrelated key", doc, err)
		}
	}
}

// TestExcluding: value problems about fields that failed to decode are
// dropped (they would be about the value the field kept); the rest stay.
func TestExcluding(t *testing.T) {
	failed := yamlstrict.Errors{{Path: "snapshot.max_staleness"}, {Path: "http.trusted_proxies[1]"}, {Path: "etcd.tls.cert_file"}}
	var values yamlstrict.Errors
	values.Add("snapshot.max_staleness", "must be > 0")                                    // the same field
	values.Add("snapshot.confirm_interval", "10m must be below snapshot.max_staleness 5m") // names it
	values.Add("http.trusted_proxies[1]", "required")                                      // the same element
	values.Add("http.trusted_proxies[10]", "required")                                     // another element
	values.Add("etcd.tls", "cert_file and key_file go together")                           // encloses it
	values.Add("snapshot.max_staleness_extra", "x")                                        // a longer key, not inside
	values.Add("log.level", `"loud" is not one of debug, info, warn, error`)
	got := values.Excluding(failed)
	var paths []string
	for _, e := range got {
		paths = append(paths, e.Path)
	}
	if want := "http.trusted_proxies[10] snapshot.max_staleness_extra log.level"; strings.Join(paths, " ") != want {
		t.Errorf("kept %v, want %s", paths, want)
	}
	if got := values.Excluding(yamlstrict.Errors{{Msg: "not valid YAML"}}); len(got) != 0 {
		t.Errorf("a document that did not parse keeps %v", got)
	}
}

// FuzzDecodePartial: DecodePartial never panics; on a document Decode
// accepts it decodes the same; otherwise it reports Decode's problems.
func FuzzDecodePartial(f *testing.F) {
	for _, s := range []string{
		"name: a\nport: 1\n", "port: x\nitems: [{b: 1}, {b: y}, 3]\n", "nam: x\n", "timeouts: [1]\n",
		"limits: {a: b}\nsubs: {x: {b: q}}\n", "matrix: [[1, x], 2]\n", "by_id: {x: y}\n", "level: mid\n", "- a\n", "",
		"items: [{b: 1, b: 2}]\n", "ptr: {read: 1h, rd: 2}\n", "nested: {a: [1, b]}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var full, part config
		errFull := yamlstrict.Decode(data, &full)
		errPart := yamlstrict.DecodePartial(data, &part)
		if errFull == nil {
			if errPart != nil || !reflect.DeepEqual(full, part) {
				t.Fatalf("Decode accepted %q, DecodePartial: %v, %+v != %+v", data, errPart, part, full)
			}
			return
		}
		if errPart == nil || errPart.Error() != errFull.Error() {
			t.Fatalf("%q: Decode: %v; DecodePartial: %v", data, errFull, errPart)
		}
	})
}
