package topology_test

import (
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// TestPoolDocuments: labels, pools and the new service fields, valid and
// not, each problem at its field path.
func TestPoolDocuments(t *testing.T) {
	withVOD := apply(t, validDoc,
		edit{"    servers:\n      - name: wuhu-1-a", "    labels: {fleet: vod}\n    servers:\n      - name: wuhu-1-a"},
		edit{lastService, lastService + "pools:\n  - {name: vod, match: {fleet: vod}, health: {max_cpu: 0.8}}\n"},
	)
	s := mustCompile(t, apply(t, withVOD, edit{lastService, lastService + "    pool: vod\n    answers: 2\n"}))
	if s.Services[0].Pool != 0 || len(s.Pools[0].Servers) != 1 || s.Servers[s.Pools[0].Servers[0]].Name != "wuhu-1-a" {
		t.Fatalf("pool: %+v", s.Pools)
	}
	if s.Servers[1].Health.MaxCPU != 0.8 || s.Servers[0].Health.MaxCPU != 0 {
		t.Errorf("pool health thresholds: %v %v", s.Servers[0].Health, s.Servers[1].Health)
	}
	if s.InPool(0, 0) || !s.InPool(0, 1) || s.Services[0].Answers != 2 {
		t.Errorf("InPool or answers wrong")
	}
	// family_fallback: other is the default, skip is kept.
	if s.Services[0].FamilySkip {
		t.Errorf("family_fallback defaulted to skip")
	}
	if s = mustCompile(t, apply(t, validDoc, edit{lastService, lastService + "    family_fallback: skip\n"})); !s.Services[0].FamilySkip {
		t.Errorf("family_fallback: skip not compiled")
	}
	// An inline match equal to a named pool shares it.
	s = mustCompile(t, apply(t, withVOD, edit{lastService, lastService + "    match: {fleet: vod}\n"}))
	if s.Services[0].Pool != 0 || len(s.Pools) != 1 {
		t.Errorf("inline match did not share the named pool: %d pools", len(s.Pools))
	}
	// A server's own threshold wins over its pool's.
	s = mustCompile(t, apply(t, withVOD, edit{"      - name: wuhu-1-a\n        address: 10.2.1.10:8080\n", "      - name: wuhu-1-a\n        address: 10.2.1.10:8080\n        health: {max_cpu: 0.95, expect_status: 204}\n"}))
	if h := s.Servers[1].Health; h.MaxCPU != 0.95 || h.ExpectStatus != 204 {
		t.Errorf("server health: %+v", h)
	}

	bad := []struct {
		name  string
		edits []edit
		path  string
		msg   string
	}{
		{"unknown pool", []edit{{lastService, lastService + "    pool: vdo\n"}}, "services[0] (live).pool", `unknown pool "vdo"; did you mean "vod"?`},
		{"pool and match", []edit{{lastService, lastService + "    pool: vod\n    match: {fleet: vod}\n"}}, "services[0] (live).match", "give pool or match, not both"},
		{"match selects nothing", []edit{{lastService, lastService + "    match: {fleet: premium}\n"}}, "services[0] (live).match", "matches no server (labels {fleet=premium})"},
		{"named pool selects nothing", []edit{{"match: {fleet: vod}, health", "match: {fleet: nope}, health"}}, "pools[0] (vod).match", "matches no server"},
		{"bad label value", []edit{{"labels: {fleet: vod}", "labels: {fleet: VOD}"}}, "nodes[1] (wuhu-1).labels.fleet", "label value"},
		{"pool health url", []edit{{"health: {max_cpu: 0.8}", "health: {url: 'http://x/'}"}}, "pools[0] (vod).health.url", "per server"},
		{"threshold out of range", []edit{{"health: {max_cpu: 0.8}", "health: {max_cpu: 80}"}}, "pools[0] (vod).health.max_cpu", "out of range [0, 1]"},
		{"bad expect_body", []edit{{"health: {url: \"http://10.1.1.10:8080/health\"}", "health: {url: \"http://10.1.1.10:8080/health\", expect_body: '('}"}}, "nodes[0] (hefei-1).servers[0] (hefei-1-a).health.expect_body", "not a regular expression"},
		{"bad expect_status", []edit{{"health: {url: \"http://10.1.1.10:8080/health\"}", "health: {url: \"http://10.1.1.10:8080/health\", expect_status: 42}"}}, "nodes[0] (hefei-1).servers[0] (hefei-1-a).health.expect_status", "not an HTTP status"},
		{"too many answers", []edit{{lastService, lastService + "    answers: 9\n"}}, "services[0] (live).answers", "out of range [1, 8]"},
		{"alternates header needs answers", []edit{{lastService, lastService + "    alternates_header: true\n"}}, "services[0] (live).alternates_header", "needs answers of 2 or more"},
		{"unknown family fallback", []edit{{lastService, lastService + "    family_fallback: ipv4\n"}}, "services[0] (live).family_fallback", `unknown policy "ipv4" (want other or skip)`},
		{"overflow without thresholds", []edit{{lastService, lastService + "    overflow: {resume: 0.5}\n"}}, "services[0] (live).overflow", "sets no threshold"},
		{"overflow share out of range", []edit{{lastService, lastService + "    overflow: {bandwidth_share: 1.5}\n"}}, "services[0] (live).overflow.bandwidth_share", "out of range [0, 1]"},
		{"claims need qoe", []edit{{lastService, lastService + "    overflow: {claims_share: 0.9}\n"}}, "services[0] (live).overflow", "need selection qoe"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			doc := apply(t, withVOD, tc.edits...)
			_, err := topology.Parse([]byte(doc))
			es, ok := yamlstrict.AsErrors(err)
			if !ok {
				t.Fatalf("want field errors, got %v", err)
			}
			for _, e := range es {
				if e.Path == tc.path && strings.Contains(e.Msg, tc.msg) {
					return
				}
			}
			t.Errorf("no error at %s containing %q; got:\n%v", tc.path, tc.msg, err)
		})
	}
}
