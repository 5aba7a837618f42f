package app

import (
	"fmt"
	"strings"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// maxRegionsNamed bounds the region list in the warning: enough to spot a
// misspelling, short enough for one log line.
const maxRegionsNamed = 30

// warnUnknownRegion says at WARN, once per snapshot revision (it runs on
// each swap), that this regional scheduler's region is not in the topology:
// /readyz says so too, but an operator starting a daemon reads its log.
func (s *Scheduler) warnUnknownRegion(snap *topology.Snapshot) {
	if s.Region == "" || snap == nil {
		return
	}
	if _, ok := snap.Region(s.Region); ok {
		return
	}
	names := make([]string, len(snap.Regions))
	for i, r := range snap.Regions {
		names[i] = r.Name
	}
	listed := strings.Join(names, ", ")
	if len(names) > maxRegionsNamed {
		listed = strings.Join(names[:maxRegionsNamed], ", ") + fmt.Sprintf(", ... (%d in all)", len(names))
	}
	msg := fmt.Sprintf("region %q is not in topology revision %d (regions: %s)", s.Region, snap.Revision, listed)
	if m := yamlstrict.Nearest(s.Region, names); m != "" {
		msg += fmt.Sprintf("; did you mean %q?", m)
	}
	s.Logger.Warn(msg+"; not ready until it is: check region in the configuration, or the topology", "revision", snap.Revision)
}
