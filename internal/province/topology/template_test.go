package topology_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
)

func TestSelections(t *testing.T) {
	all := topology.Selections()
	if len(all) != topology.NumSelections || all[0] != topology.DefaultSelection {
		t.Fatalf("Selections() = %v", all)
	}
	for i, s := range all {
		if s.Index() != i || !s.Valid() {
			t.Errorf("%s: Index %d, Valid %v", s, s.Index(), s.Valid())
		}
		if got, err := topology.ParseSelection(string(s)); err != nil || got != s {
			t.Errorf("ParseSelection(%q) = %q, %v", s, got, err)
		}
	}
	if got, err := topology.ParseSelection(""); err != nil || got != topology.SelectNearest {
		t.Errorf(`ParseSelection("") = %q, %v; want the default`, got, err)
	}
	if topology.Selection("").Index() != topology.SelectNearest.Index() {
		t.Error("the empty selection does not index as the default")
	}
	_, err := topology.ParseSelection("random")
	if err == nil || err.Error() != `"random" is not supported (supported: nearest, swrr, chash, p2c, qoe)` {
		t.Errorf(`ParseSelection("random") = %v`, err)
	}
	if s := topology.Selection("random"); s.Index() != -1 || s.Valid() {
		t.Errorf("unknown selection: Index %d, Valid %v", s.Index(), s.Valid())
	}
}

// TestTemplateParts: a url_template is compiled once into literal text and
// placeholders; every placeholder name round-trips.
func TestTemplateParts(t *testing.T) {
	tpl, err := topology.ParseTemplate("http://{server}/live/{channel}/{bitrate}.m3u8?{query}")
	if err != nil {
		t.Fatal(err)
	}
	want := topology.Template{
		{Text: "http://"}, {Field: topology.PlaceServer}, {Text: "/live/"}, {Field: topology.PlaceChannel},
		{Text: "/"}, {Field: topology.PlaceBitrate}, {Text: ".m3u8?"}, {Field: topology.PlaceQuery},
	}
	if !slices.Equal(tpl, want) {
		t.Errorf("parts = %+v\nwant %+v", tpl, want)
	}
	if !tpl.Has(topology.PlaceServer) || tpl.Has(topology.PlaceHost) || tpl.Has(topology.Literal) {
		t.Error("Has")
	}
	var names []string
	for _, p := range topology.Placeholders() {
		names = append(names, p.String())
		if q, ok := topology.ParsePlaceholder(p.String()); !ok || q != p {
			t.Errorf("ParsePlaceholder(%q) = %v, %v", p, q, ok)
		}
	}
	if got := strings.Join(names, ","); got != "server,host,port,channel,path,query,bitrate,service,region" {
		t.Errorf("placeholders: %s", got)
	}
	if _, ok := topology.ParsePlaceholder(""); ok {
		t.Error(`ParsePlaceholder("") = ok`)
	}
	for tpl, msg := range map[string]string{
		"http://{server}/{quality}": "unknown placeholder {quality} (known: server, host, port, channel, path, query, bitrate, service, region)",
		"http://{server":            "unclosed '{' at offset 7",
		"http://{}/":                "malformed placeholder at offset 7",
		"http://server}/":           "unmatched '}' at offset 13",
	} {
		if _, err := topology.ParseTemplate(tpl); err == nil || err.Error() != msg {
			t.Errorf("ParseTemplate(%q) = %v, want %q", tpl, err, msg)
		}
	}
}

// TestCompiledServices: the snapshot's services carry their compiled
// template and their typed, defaulted selection.
func TestCompiledServices(t *testing.T) {
	s := mustCompile(t, apply(t, validDoc, edit{"selection: nearest", "selection: chash"}))
	sv := s.Services[0]
	if sv.Selection != topology.SelectCHash {
		t.Errorf("selection = %q", sv.Selection)
	}
	if len(sv.Template) != 7 || sv.Template[1].Field != topology.PlaceServer || sv.Template[6].Text != "/index.m3u8" {
		t.Errorf("template = %+v", sv.Template)
	}
	s = mustCompile(t, apply(t, validDoc, edit{"    selection: nearest\n", ""}))
	if s.Services[0].Selection != topology.DefaultSelection || s.Doc.Services[0].Selection != "" {
		t.Errorf("default: view %q, document %q", s.Services[0].Selection, s.Doc.Services[0].Selection)
	}
}
