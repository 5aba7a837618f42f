package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// rolloutTopology is a province of hefei and wuhu: wuhu has one node of
// two servers and one zone of two networks.
const rolloutTopology = `revision: 7
anycast:
  service_ip: 198.18.0.1
  center_prefix: 198.18.0.0/26
regions:
  - name: hefei
    location: {lat: 31.82, lon: 117.23}
  - name: wuhu
    location: {lat: 31.35, lon: 118.38}
    fallback: [hefei]
nodes:
  - name: hefei-1
    region: hefei
    location: {lat: 31.82, lon: 117.23}
    servers:
      - {name: hefei-1-a, address: "10.1.4.10:8080"}
  - name: wuhu-1
    region: wuhu
    location: {lat: 31.35, lon: 118.38}
    servers:
      - {name: wuhu-1-a, address: "10.2.4.10:8080"}
      - {name: wuhu-1-b, address: "10.2.4.11:8080"}
zones:
  - {name: hefei-stb, region: hefei, networks: [10.1.1.0/24]}
  - {name: wuhu-stb, region: wuhu, networks: [10.2.1.0/24, 10.2.2.0/24]}
services:
  - name: live
    hostnames: [live.iptv.example]
    url_template: "http://{server}/{path}"
    bitrates_kbps: [2500]
`

// cityScript is wuhu's scheduler and the center's answers to wuhu's STBs
// over time (seconds after t0; a negative time: never).
type cityScript struct {
	appear, ready, withdraw, vanish float64
	// answers: the center's count for wuhu at el seconds, the failed
	// ones, and when it last answered (seconds).
	answers func(el float64) (answered, failed uint64, last float64)
	// runFrom: the center's current run of answers to wuhu's STBs
	// started then (0: long before t0).
	runFrom float64
	// noCenter: the center does not announce its prefix.
	noCenter bool
	// peerUp > 0: wuhu-1 has a BGP peer, established from then on.
	peerUp float64
}

// between is before <= el < after, a negative after meaning never.
func between(el, from, until float64) bool {
	return from >= 0 && el >= from && (until < 0 || el < until)
}

func (c cityScript) province(now func() time.Time) map[string]handler {
	status := func(int, proto.Message) (proto.Message, error) {
		el := now().Sub(t0).Seconds()
		st := &pb.StatusResponse{Revision: 7, CenterId: "center",
			Regions: []*pb.RegionHealth{{Region: "wuhu", Servers: 2, Healthy: 2, Available: 2}}}
		ctr := &pb.Instance{Id: "center", Role: "central", State: "ready", Announced: !c.noCenter, Announces: "198.18.0.0/26"}
		if c.noCenter {
			ctr.AnnounceReason = "drill"
		}
		st.Instances = append(st.Instances, ctr,
			&pb.Instance{Id: "hefei-1", Role: "regional", Region: "hefei", State: "ready", Announced: true, Announces: "198.18.0.1/32"})
		if between(el, c.appear, c.vanish) {
			in := &pb.Instance{Id: "wuhu-1", Role: "regional", Region: "wuhu", State: "starting", SnapshotRevision: 7, AnnounceReason: "not ready: no snapshot yet"}
			if between(el, c.ready, -1) {
				in.State, in.AnnounceReason = "ready", ""
			}
			if c.peerUp > 0 {
				in.BgpPeers = []*pb.BGPPeer{{Address: "10.2.2.1", Asn: 65102, State: "active"}}
				if el >= c.peerUp {
					in.BgpPeers[0].State = "established"
				}
			}
			if between(el, c.ready, c.withdraw) {
				in.Announced, in.Announces = true, "198.18.0.1/32"
			} else if between(el, c.withdraw, -1) {
				in.State, in.AnnounceReason, in.Announces = "stopping", "stopping", "198.18.0.1/32"
			}
			st.Instances = append(st.Instances, in)
		}
		n, failed, last := c.answers(el)
		run := at(-100)
		if c.runFrom > 0 && el >= c.runFrom {
			run = at(c.runFrom)
		}
		st.CenterTraffic = []*pb.RegionTraffic{
			{ClientRegion: "hefei", Answered: 7, RunStart: at(-300), Last: at(-200)},
			{ClientRegion: "wuhu", Answered: n, Failed: failed, RunStart: run, Last: at(last)},
		}
		return st, nil
	}
	return map[string]handler{"Status": status, "GetTopology": reply(&pb.GetTopologyResponse{Revision: 7, Document: []byte(rolloutTopology)})}
}

// steps is 10 answers every 250 ms from 100 at -100 s until stop (seconds),
// the last of each 250 ms 0.1 s before its end; failing from failFrom on
// (negative: none).
func steps(stop, failFrom float64) func(el float64) (uint64, uint64, float64) {
	return func(el float64) (uint64, uint64, float64) {
		a := min(el, stop)
		k := uint64(a / 0.25)
		var failed uint64
		if failFrom >= 0 && el >= failFrom {
			failed = 2
		}
		return 100 + 10*k, failed, float64(k)*0.25 - 0.1
	}
}

// wuhuRollout: wuhu-1 registers at +1 s, is ready and announces at +2 s;
// the center answers wuhu's STBs until +2.5 s.
var wuhuRollout = cityScript{appear: 1, ready: 2, withdraw: -1, vanish: -1, answers: steps(2.5, -1)}

func TestRollout(t *testing.T) {
	started := []call{{method: "Status", req: &pb.StatusRequest{}}, {method: "GetTopology", req: &pb.GetTopologyRequest{}}}
	head := "rollout wuhu: topology, scheduler, local answers; so far the center answered 100 of wuhu's STBs (0 with an error)\n" +
		"  +  0.0s  1/3 topology: wuhu is in revision 7: 1 node, 2 servers (2 available), 1 zone (2 networks)\n"
	ready := "  +  1.0s  wuhu-1: starting, not announced (not ready: no snapshot yet)\n" +
		"  +  2.0s  wuhu-1: ready, announces 198.18.0.1/32\n" +
		"  +  2.0s  2/3 scheduler: wuhu-1 at revision 7: ready, announces 198.18.0.1/32\n"
	stale := wuhuRollout
	stale.ready = -1
	busy := wuhuRollout
	busy.answers = steps(1000, -1)
	failing := wuhuRollout
	failing.answers = steps(2.5, 2.2)
	bgp := wuhuRollout
	bgp.peerUp = 2.6
	quiet := wuhuRollout
	quiet.answers = func(float64) (uint64, uint64, float64) { return 0, 0, -100 }
	runCases(t, []cmdCase{
		{
			name: "rolled out", args: []string{"rollout", "wuhu"}, rpcAt: wuhuRollout.province,
			want: head + ready +
				"  +  5.5s  3/3 local: the center answered none of wuhu's STBs for 3s; 100 since the rollout began (100 -> 200), the last at +2.4s, none failed\n" +
				"rollout done: wuhu answers its own STBs; its scheduler was seen announcing at +2.0s, the center's last answer to the city was at +2.4s\n",
			sent: started, sentMore: true,
		},
		{
			name: "flags after the city", args: []string{"rollout", "--settle", "1s", "wuhu"}, rpcAt: wuhuRollout.province,
			want: head + ready +
				"  +  3.5s  3/3 local: the center answered none of wuhu's STBs for 1s; 100 since the rollout began (100 -> 200), the last at +2.4s, none failed\n" +
				"rollout done: wuhu answers its own STBs; its scheduler was seen announcing at +2.0s, the center's last answer to the city was at +2.4s\n",
			sent: started, sentMore: true,
		},
		{
			// Announced, but its BGP session not up yet: its route has not
			// reached a router.
			name: "waits for the BGP session", args: []string{"rollout", "wuhu"}, rpcAt: bgp.province,
			want: head +
				"  +  1.0s  wuhu-1: starting, not announced (not ready: no snapshot yet), BGP 10.2.2.1 active\n" +
				"  +  2.0s  wuhu-1: ready, announces 198.18.0.1/32, BGP 10.2.2.1 active\n" +
				"  +  2.8s  wuhu-1: ready, announces 198.18.0.1/32, BGP 10.2.2.1 established\n" +
				"  +  2.8s  2/3 scheduler: wuhu-1 at revision 7: ready, announces 198.18.0.1/32, BGP 10.2.2.1 established\n" +
				"  +  5.8s  3/3 local: the center answered none of wuhu's STBs for 3s; 100 since the rollout began (100 -> 200), the last at +2.4s, none failed\n" +
				"rollout done: wuhu answers its own STBs; its scheduler was seen announcing at +2.8s, the center's last answer to the city was at +2.4s\n",
			sent: started, sentMore: true,
		},
		{
			name: "no traffic from the city", args: []string{"rollout", "wuhu"}, rpcAt: quiet.province,
			want: "rollout wuhu: topology, scheduler, local answers; so far the center answered 0 of wuhu's STBs (0 with an error)\n" +
				"  +  0.0s  1/3 topology: wuhu is in revision 7: 1 node, 2 servers (2 available), 1 zone (2 networks)\n" + ready +
				"  +  5.0s  3/3 local: the center answered none of wuhu's STBs for 3s; 0 since the rollout began (0 -> 0), none failed\n" +
				"rollout done: wuhu answers its own STBs; its scheduler was seen announcing at +2.0s; the center answered none of its STBs meanwhile (no traffic from the city reached it)\n",
			sent: started, sentMore: true,
		},
		{
			name: "not in the topology", args: []string{"rollout", "bozhou"}, rpcAt: wuhuRollout.province,
			want: "rollout bozhou: topology, scheduler, local answers; so far the center answered 0 of bozhou's STBs (0 with an error)\n" +
				"  +  0.0s  1/3 topology FAILED: bozhou is not a region of topology revision 7 (regions: hefei, wuhu): add the region, its nodes and its coverage zones, then schedctl apply\n",
			wantErr: "schedctl rollout: step 1/3 (topology) failed after 0.0s: bozhou is not a region of topology revision 7 (regions: hefei, wuhu): add the region, its nodes and its coverage zones, then schedctl apply",
			sent:    started,
		},
		{
			name: "never ready", args: []string{"rollout", "wuhu", "--ready-timeout", "3s"}, rpcAt: stale.province,
			want: head + "  +  1.0s  wuhu-1: starting, not announced (not ready: no snapshot yet)\n" +
				"  +  3.0s  2/3 scheduler FAILED: no scheduler of wuhu was ready and announcing its route within 3s: wuhu-1 starting, not announced (not ready: no snapshot yet)\n",
			wantErr: "schedctl rollout: step 2/3 (scheduler) failed after 3.0s: no scheduler of wuhu was ready and announcing its route within 3s: wuhu-1 starting, not announced (not ready: no snapshot yet)",
			sent:    started, sentMore: true,
		},
		{
			name: "never started", args: []string{"rollout", "wuhu", "--ready-timeout", "500ms"}, rpcAt: cityScript{appear: -1, ready: -1, withdraw: -1, vanish: -1, answers: steps(100, -1)}.province,
			want:    head + "  +  0.5s  2/3 scheduler FAILED: no scheduler of wuhu was ready and announcing its route within 500ms: none registered: start it (systemctl enable --now anysched-regional) and read its log\n",
			wantErr: "schedctl rollout: step 2/3 (scheduler) failed after 0.5s: ...",
			sent:    started, sentMore: true,
		},
		{
			name: "the center keeps answering", args: []string{"rollout", "wuhu", "--local-timeout", "2s"}, rpcAt: busy.province,
			want: head + ready +
				"  +  4.0s  3/3 local FAILED: the center still answers wuhu's STBs 2s after wuhu-1 announced (160 since the rollout began (100 -> 260), the last at +3.9s): do the city's routers prefer its /32? (on the city router: birdc show route 198.18.0.1/32 all)\n",
			wantErr: "schedctl rollout: step 3/3 (local) failed after 4.0s: the center still answers wuhu's STBs 2s after wuhu-1 announced ...",
			sent:    started, sentMore: true,
		},
		{
			name: "failed answers", args: []string{"rollout", "wuhu"}, rpcAt: failing.province,
			want: head + ready +
				"  +  2.2s  3/3 local FAILED: the center answered 2 of wuhu's STBs with an error (HTTP 5xx, DNS SERVFAIL: nowhere to send them); it answered 90 since the rollout began (100 -> 190), the last at +2.1s\n",
			wantErr: "schedctl rollout: step 3/3 (local) failed after 2.2s: the center answered 2 of wuhu's STBs with an error ...",
			sent:    started, sentMore: true,
		},
		{
			name: "the center is down", args: []string{"rollout", "wuhu"}, rpc: map[string]handler{"Status": fail(codes.Unavailable, "connection refused")},
			wantErr: "schedctl rollout: connection refused\n(is the central scheduler running and reachable? see --server)",
			sent:    started[:1],
		},
		// Mistakes found before any RPC.
		{name: "no city", args: []string{"rollout"}, wantErr: "schedctl rollout: missing CITY (the region to roll out)", usage: true},
		{name: "the center", args: []string{"rollout", "center", "--undo"}, wantErr: "schedctl rollout: center is the province's center, not a city", usage: true},
		{name: "two cities", args: []string{"rollout", "wuhu", "hefei"}, wantErr: `schedctl rollout: unexpected argument "hefei"`, usage: true},
		{name: "zero timeout", args: []string{"rollout", "wuhu", "--local-timeout", "0s"}, wantErr: "schedctl rollout: --local-timeout 0s: want a positive duration", usage: true},
		{name: "bad output", args: []string{"rollout", "wuhu", "-o", "yaml"}, wantErr: `schedctl rollout: invalid value "yaml" for flag -o: want table or json`, usage: true},
	})
}

// wuhuUndo: wuhu-1 announces until +1 s, withdraws (stopping) and is gone
// at +1.5 s; the center answers wuhu's STBs from +1.2 s on.
var wuhuUndo = cityScript{appear: 0, ready: 0, withdraw: 1, vanish: 1.5, runFrom: 1.1, answers: func(el float64) (uint64, uint64, float64) {
	if el < 1.25 {
		return 200, 0, -50
	}
	k := uint64((el - 1) / 0.25)
	return 200 + 5*k, 0, 1 + float64(k)*0.25 - 0.05
}}

func TestRolloutUndo(t *testing.T) {
	first := []call{{method: "Status", req: &pb.StatusRequest{}}}
	head := "rollout --undo wuhu: stop wuhu's schedulers now (systemctl stop anysched-regional on each of its hosts); waiting up to 5m0s for their routes to go; the center (center) takes its STBs over\n"
	never := wuhuUndo
	never.withdraw, never.vanish = -1, -1
	silent := wuhuUndo
	silent.answers = func(float64) (uint64, uint64, float64) { return 200, 0, -50 }
	failing := wuhuUndo
	failing.answers = func(el float64) (uint64, uint64, float64) {
		n, _, last := wuhuUndo.answers(el)
		if el >= 2 {
			return n, 3, last
		}
		return n, 0, last
	}
	runCases(t, []cmdCase{
		{
			name: "taken out", args: []string{"rollout", "wuhu", "--undo"}, rpcAt: wuhuUndo.province,
			want: head +
				"  +  1.0s  wuhu-1: stopping, not announced (stopping)\n" +
				"  +  1.0s  1/2 withdrawn: no scheduler of wuhu announces its route (wuhu-1 stopping, not announced (stopping))\n" +
				// the center's count is first seen grown at +1.25 s, its run
				// started at +1.1 s
				"  +  1.1s  the center (center) answered its first wuhu STB: it took the city over\n" +
				"  +  6.2s  2/2 center: the center (center) answers wuhu's STBs: 105 since the rollout began (200 -> 305), the first at +1.1s, none failed in the 5s watched\n" +
				"rollout undone: the center answers wuhu's STBs; wuhu stays in the topology (the center still sends its STBs to its servers): remove it with schedctl apply to take it out entirely\n",
			sent: first, sentMore: true,
		},
		{
			// kill -9 (or a crash): the record stays, announced, until its
			// lease expires, then goes.
			name: "killed", args: []string{"rollout", "wuhu", "--undo", "--window", "1s"}, rpcAt: cityScript{appear: 0, ready: 0, withdraw: -1, vanish: 1, runFrom: 1.1, answers: wuhuUndo.answers}.province,
			want: head +
				"  +  1.0s  wuhu-1: gone (its record with it: stopped)\n" +
				"  +  1.0s  1/2 withdrawn: no scheduler of wuhu announces its route (wuhu-1 gone (its record with it: stopped))\n" +
				"  +  1.1s  the center (center) answered its first wuhu STB: it took the city over\n" +
				"  +  2.2s  2/2 center: the center (center) answers wuhu's STBs: 25 since the rollout began (200 -> 225), the first at +1.1s, none failed in the 1s watched\n" +
				"rollout undone: the center answers wuhu's STBs; wuhu stays in the topology (the center still sends its STBs to its servers): remove it with schedctl apply to take it out entirely\n",
			sent: first, sentMore: true,
		},
		{
			// Stopped before the command: nothing to wait for.
			name: "already gone", args: []string{"rollout", "--undo", "--window", "1s", "wuhu"}, rpcAt: cityScript{appear: -1, ready: -1, withdraw: -1, vanish: -1, runFrom: 1.1, answers: wuhuUndo.answers}.province,
			want: head +
				"  +  0.0s  1/2 withdrawn: no scheduler of wuhu announces its route (none registered)\n" +
				"  +  1.1s  the center (center) answered its first wuhu STB: it took the city over\n" +
				"  +  2.2s  2/2 center: the center (center) answers wuhu's STBs: 25 since the rollout began (200 -> 225), the first at +1.1s, none failed in the 1s watched\n" +
				"rollout undone: the center answers wuhu's STBs; wuhu stays in the topology (the center still sends its STBs to its servers): remove it with schedctl apply to take it out entirely\n",
			sent: first, sentMore: true,
		},
		{
			name: "not stopped", args: []string{"rollout", "wuhu", "--undo", "--withdraw-timeout", "2s"}, rpcAt: never.province,
			want: strings.Replace(head, "5m0s", "2s", 1) +
				"  +  2.0s  1/2 withdrawn FAILED: wuhu-1 still announce(s) the route after 2s: stop it (systemctl stop anysched-regional)\n",
			wantErr: "schedctl rollout: step 1/2 (withdrawn) failed after 2.0s: wuhu-1 still announce(s) the route after 2s: stop it (systemctl stop anysched-regional)",
			sent:    first, sentMore: true,
		},
		{
			name: "no center to take over", args: []string{"rollout", "wuhu", "--undo"}, rpcAt: cityScript{appear: 0, ready: 0, withdraw: -1, vanish: -1, answers: wuhuUndo.answers, noCenter: true}.province,
			want:    "  +  0.0s  1/2 withdrawn FAILED: no center announces the province's prefix: without wuhu's schedulers its STBs would reach no scheduler; stop nothing\n",
			wantErr: "schedctl rollout: step 1/2 (withdrawn) failed after 0.0s: no center announces the province's prefix: ...",
			sent:    first,
		},
		{
			name: "no traffic", args: []string{"rollout", "wuhu", "--undo", "--takeover-timeout", "3s"}, rpcAt: silent.province,
			want: head +
				"  +  1.0s  wuhu-1: stopping, not announced (stopping)\n" +
				"  +  1.0s  1/2 withdrawn: no scheduler of wuhu announces its route (wuhu-1 stopping, not announced (stopping))\n" +
				"  +  4.0s  2/2 center FAILED: no center answered any of wuhu's STBs within 3s of the withdrawal: is there STB traffic from the city (the takeover shows only through it)? does the city router hold the center's prefix?\n",
			wantErr: "schedctl rollout: step 2/2 (center) failed after 4.0s: no center answered any of wuhu's STBs within 3s of the withdrawal: ...",
			sent:    first, sentMore: true,
		},
		{
			name: "failed answers", args: []string{"rollout", "wuhu", "--undo"}, rpcAt: failing.province,
			want: head +
				"  +  1.0s  wuhu-1: stopping, not announced (stopping)\n" +
				"  +  1.0s  1/2 withdrawn: no scheduler of wuhu announces its route (wuhu-1 stopping, not announced (stopping))\n" +
				"  +  1.1s  the center (center) answered its first wuhu STB: it took the city over\n" +
				"  +  6.2s  2/2 center FAILED: the center answered 3 of wuhu's STBs with an error (HTTP 5xx, DNS SERVFAIL); it answered 105 since the rollout began (200 -> 305), the first at +1.1s\n",
			wantErr: "schedctl rollout: step 2/2 (center) failed after 6.2s: the center answered 3 of wuhu's STBs with an error ...",
			sent:    first, sentMore: true,
		},
	})
}

// -o json prints the report, also when a step fails; the progress goes to
// standard error.
func TestRolloutJSON(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		script  cityScript
		wantErr bool
		check   func(t *testing.T, r rolloutReport)
	}{
		{"rolled out", []string{"rollout", "wuhu", "-o", "json"}, wuhuRollout, false, func(t *testing.T, r rolloutReport) {
			if !r.OK || r.Undo || r.Revision != 7 || len(r.Steps) != 3 || r.CenterBefore != 100 || r.CenterAfter != 200 || r.CenterAnswered != 100 || r.CenterFailed != 0 {
				t.Errorf("report %+v", r)
			}
			if r.AnnouncedSeconds == nil || *r.AnnouncedSeconds != 2 || r.LastCenterSeconds == nil || *r.LastCenterSeconds != 2.4 || r.Centers["center"] != 100 {
				t.Errorf("times or centers %+v", r)
			}
			if len(r.Instances) != 1 || r.Instances[0] != "wuhu-1" {
				t.Errorf("instances %v", r.Instances)
			}
			for i, want := range []float64{0, 2, 5.5} {
				if s := r.Steps[i]; !s.OK || s.ElapsedSeconds != want {
					t.Errorf("step %d: %+v, want ok at %gs", i+1, s, want)
				}
			}
		}},
		{"a step fails", []string{"rollout", "-o", "json", "wuhu", "--ready-timeout", "1s"}, cityScript{appear: -1, ready: -1, withdraw: -1, vanish: -1, answers: steps(100, -1)}, true, func(t *testing.T, r rolloutReport) {
			if r.OK || !strings.HasPrefix(r.Reason, "step 2/3 (scheduler) failed after 1.0s: ") || len(r.Steps) != 2 || r.Steps[1].OK {
				t.Errorf("report %+v", r)
			}
		}},
		{"undone", []string{"rollout", "wuhu", "--undo", "-o", "json"}, wuhuUndo, false, func(t *testing.T, r rolloutReport) {
			if !r.OK || !r.Undo || len(r.Steps) != 2 || r.CenterBefore != 200 || r.CenterAfter != 305 || r.CenterAnswered != 105 {
				t.Errorf("report %+v", r)
			}
			if r.WithdrawnSeconds == nil || *r.WithdrawnSeconds != 1 || r.FirstCenterSeconds == nil || *r.FirstCenterSeconds != 1.1 {
				t.Errorf("times %+v", r)
			}
			if len(r.Instances) != 1 || r.Instances[0] != "wuhu-1" {
				t.Errorf("instances %v", r.Instances)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeAdmin{}
			var out, errOut bytes.Buffer
			e := testEnv(f, &out, &errOut)
			f.handlers = tc.script.province(e.clock.Now)
			err := run(context.Background(), tc.args, e)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v", err)
			}
			var r rolloutReport
			if err := json.Unmarshal(out.Bytes(), &r); err != nil {
				t.Fatalf("stdout is not the report: %v\n%s", err, out.String())
			}
			if !strings.Contains(errOut.String(), "1/") {
				t.Errorf("no progress on stderr: %q", errOut.String())
			}
			tc.check(t, r)
		})
	}
}

// A rollout ends when schedctl is interrupted, and polls no more.
func TestRolloutInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fakeAdmin{}
	e := testEnv(f, &bytes.Buffer{}, &bytes.Buffer{})
	f.handlers = cityScript{appear: -1, ready: -1, withdraw: -1, vanish: -1, answers: steps(100, -1)}.province(e.clock.Now)
	inner := f.handlers["Status"]
	f.handlers["Status"] = func(n int, req proto.Message) (proto.Message, error) {
		if n == 3 {
			cancel()
		}
		return inner(n, req)
	}
	err := run(ctx, []string{"rollout", "wuhu"}, e)
	if err == nil || err.Error() != "schedctl rollout: context canceled" {
		t.Fatalf("error %v, want context canceled", err)
	}
	if n := len(f.sent()); n != 5 { // Status, GetTopology, three polls
		t.Errorf("%d calls, want 5", n)
	}
}

// A Status read that fails while the rollout polls is read again at the
// next poll, not the end of the rollout; the rollout's own deadline is an
// hour unless --timeout is given.
func TestRolloutPollsPastErrors(t *testing.T) {
	f := &fakeAdmin{}
	var out bytes.Buffer
	e := testEnv(f, &out, &bytes.Buffer{})
	f.handlers = wuhuRollout.province(e.clock.Now)
	inner := f.handlers["Status"]
	f.handlers["Status"] = func(n int, req proto.Message) (proto.Message, error) {
		if n == 2 || n == 9 {
			return fail(codes.Unavailable, "etcdserver: leader changed")(n, req)
		}
		return inner(n, req)
	}
	if err := run(context.Background(), []string{"rollout", "wuhu"}, e); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "rollout done: wuhu answers its own STBs") {
		t.Errorf("output:\n%s", out.String())
	}
	sent := f.sent()
	if d := time.Until(sent[0].deadline); d < 50*time.Minute {
		t.Errorf("deadline in %s, want about an hour", d)
	}

}
