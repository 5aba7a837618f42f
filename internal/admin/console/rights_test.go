package console

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
)

// The province page lists each service's rights rules in order and says
// which apply now.
func TestRightsListed(t *testing.T) {
	con := newConsole(t, true)
	con.rights = []serviceRules{{Service: "live", Rules: []topology.Rule{
		{Name: "derby", Channels: []string{"cctv5"}, Regions: []string{"hefei"}, Action: topology.ActionBlackout,
			From: "2026-12-06T18:00:00Z", Until: "2026-12-06T21:00:00Z"},
		{Networks: []string{"100.64.0.0/10"}, Action: topology.ActionAllow},
	}}}
	got := con.rightsAt(time.Date(2026, 12, 6, 21, 0, 0, 0, time.UTC))
	if len(got) != 2 || got[0].Active || !got[1].Active || got[0].Index != 0 ||
		got[0].Rule != "blackout cctv5 in regions=[hefei] 2026-12-06T18:00:00Z..2026-12-06T21:00:00Z (derby)" {
		t.Fatalf("%+v", got)
	}
	if now := con.rightsAt(time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)); !now[0].Active {
		t.Errorf("inside the window: %+v", now[0])
	}
	var b bytes.Buffer
	if err := con.pages.t["province"].Execute(&b, pageData{Page: "province", Province: &Province{Rights: got}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "<td>live</td><td>0</td><td>blackout cctv5 in regions=[hefei]") || !strings.Contains(b.String(), "outside its window") {
		t.Errorf("page:\n%s", b.String())
	}
}
