// Package statusview reads who answered whom out of the admin API's Status:
// the central schedulers' answer counts by the STBs' region, which drills,
// rollouts, schedctl status and the console all follow; and who plans each
// region's viewers, with what QoE, which drills and the console tell.
package statusview

import (
	"github.com/anysched/anysched/internal/province/instance"
	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// CentersTraffic is every central scheduler's answers by the STBs' region:
// the one answering the call live, the others from their records.
func CentersTraffic(st *pb.StatusResponse) map[string][]*pb.RegionTraffic {
	out := map[string][]*pb.RegionTraffic{}
	for _, in := range st.GetInstances() {
		if instance.Role(in.GetRole()) == instance.Central {
			out[in.GetId()] = in.GetTraffic()
		}
	}
	if id := st.GetCenterId(); id != "" {
		out[id] = st.GetCenterTraffic() // live beats the record
	}
	return out
}

// CenterTraffic is every central scheduler's count for region, by center.
func CenterTraffic(st *pb.StatusResponse, region string) map[string]*pb.RegionTraffic {
	out := map[string]*pb.RegionTraffic{}
	for id, ts := range CentersTraffic(st) {
		for _, t := range ts {
			if t.GetClientRegion() == region {
				out[id] = t
				break
			}
		}
	}
	return out
}
