package app_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/testbed/fixture"
)

// The finding: a valid document with nodes: [] replaced the province, every
// scheduler answered 503 and /readyz still said ready. Now schedctl refuses
// it without --force, and once an admin forces it the schedulers are not
// ready (they withdraw) and say why. The center signs, the city verifies.
func TestEmptyProvinceIsGuardedAndNotReady(t *testing.T) {
	cc := centerConfig(t)
	withSigningKey(t, &cc)
	runCenter(t, &cc)
	waitUp(t, "center admin API", func() bool { _, err := schedctl(t, cc.GRPC.Listen, "status"); return err == nil })
	city := topogen.Cities(nil, 3)[0].Name
	rc := regionalConfig(t, cc, city)
	runRegional(t, &rc)
	admins := []string{cc.Admin.Listen, rc.Admin.Listen}

	if out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", writeTopology(t, 100)); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	for _, a := range admins {
		waitUp(t, a+" ready on the signed topology", func() bool { si, err := info(a); return err == nil && si.Ready })
	}

	empty := fixture.Weighted(t, 100)
	empty.Nodes = []topology.Node{}
	file := fixture.WriteYAML(t, empty)
	out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", file)
	if err == nil || !strings.Contains(err.Error(), "removes every node") || !strings.Contains(out, "regions left with no server") {
		t.Fatalf("nodes: [] without --force: %v\n%s", err, out)
	}
	for _, a := range admins {
		if si, _ := info(a); !si.Ready {
			t.Fatalf("%s not ready after a refused apply: %+v", a, si)
		}
	}

	// The local caller is admin (grpc.local_role): it may force.
	if out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "--force", "-f", file); err != nil || !strings.Contains(out, "forced past the removal guard") {
		t.Fatalf("forced: %v\n%s", err, out)
	}
	for _, a := range admins {
		waitUp(t, a+" not ready without servers", func() bool {
			si, err := info(a)
			return err == nil && !si.Ready && strings.Contains(si.Why, "has no servers in any region")
		})
		resp, err := http.Get("http://" + a + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("%s /readyz answered 200 with no servers", a)
		}
	}

	// history shows both applies, and a rollback brings the servers back.
	out, err = schedctl(t, cc.GRPC.Listen, "history")
	if err != nil || strings.Count(out, "local") != 2 || !strings.Contains(out, "-3 nodes, -6 servers") {
		t.Fatalf("history: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	first := strings.Fields(lines[len(lines)-1])[0]
	if out, err := schedctl(t, cc.GRPC.Listen, "rollback", first, "--yes"); err != nil || !strings.Contains(out, "rolled back to "+first) {
		t.Fatalf("rollback: %v\n%s", err, out)
	}
	for _, a := range admins {
		waitUp(t, a+" ready after the rollback", func() bool { si, err := info(a); return err == nil && si.Ready })
	}
}
