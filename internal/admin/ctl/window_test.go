package ctl

import (
	"strings"
	"testing"
	"time"

	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestParseWhen: the times an operator types, in a zone that is not UTC;
// a bad one is a usage error naming the flag and the forms accepted.
func TestParseWhen(t *testing.T) {
	shanghai := time.FixedZone("CST", 8*3600)
	base := time.Date(2026, 12, 7, 21, 30, 0, 0, shanghai)
	for _, c := range []struct {
		in   string
		want time.Time
	}{
		{"2026-12-08T01:00:00+08:00", time.Date(2026, 12, 8, 1, 0, 0, 0, shanghai)},
		{"2026-12-07T17:00:00Z", time.Date(2026, 12, 7, 17, 0, 0, 0, time.UTC)},
		{"now", base},
		{"+2h", base.Add(2 * time.Hour)},
		{"+90m", base.Add(90 * time.Minute)},
		{"+1d", base.Add(24 * time.Hour)},
		{"22:00", time.Date(2026, 12, 7, 22, 0, 0, 0, shanghai)},  // later today
		{"04:00", time.Date(2026, 12, 8, 4, 0, 0, 0, shanghai)},   // passed today: tomorrow
		{"21:30", time.Date(2026, 12, 8, 21, 30, 0, 0, shanghai)}, // now is not after now
		{"2026-12-09 03:15", time.Date(2026, 12, 9, 3, 15, 0, 0, shanghai)},
	} {
		got, err := parseWhen("--from", c.in, base, shanghai)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("parseWhen(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "tomorrow", "25:00", "+-2h", "+0s", "+2x", "2026-13-01 00:00", "+d"} {
		_, err := parseWhen("--until", in, base, shanghai)
		if err == nil || !strings.HasPrefix(err.Error(), "--until: ") || !strings.Contains(err.Error(), "HH:MM") {
			t.Errorf("parseWhen(%q): %v, want an error naming --until and the forms", in, err)
		}
	}
}

func TestDrainWindowFlags(t *testing.T) {
	drain := func(req *pb.DrainRequest) []call { return []call{{method: "Drain", req: req}} }
	from, until := t0.Add(18*time.Hour), t0.Add(22*time.Hour) // 22:00 and 02:00 UTC
	runCases(t, []cmdCase{
		{
			name: "a window, the until relative to the from", args: []string{"drain", "node", "hefei-1", "--from", "22:00", "--until", "+4h", "--reason", "firmware"},
			rpc:  map[string]handler{"Drain": reply(&pb.DrainResponse{Servers: 2, Changed: true, From: timestamppb.New(from), Until: timestamppb.New(until)})},
			want: "scheduled: node hefei-1 (2 servers) drained from 2026-11-30 22:00 UTC until 2026-12-01 02:00 UTC (4h0m0s); every scheduler applies it on its own clock\n",
			sent: drain(&pb.DrainRequest{Kind: "node", Name: "hefei-1", Reason: "firmware", From: timestamppb.New(from), Until: timestamppb.New(until)}),
		},
		{
			name: "an HH:MM until after the from: the next morning", args: []string{"drain", "server", "a", "--from", "22:00", "--until", "02:00"},
			rpc:  map[string]handler{"Drain": reply(&pb.DrainResponse{Servers: 1, Changed: true, From: timestamppb.New(from), Until: timestamppb.New(until)})},
			want: "scheduled: server a (1 server) drained from 2026-11-30 22:00 UTC until 2026-12-01 02:00 UTC (4h0m0s); every scheduler applies it on its own clock\n",
			sent: drain(&pb.DrainRequest{Kind: "server", Name: "a", From: timestamppb.New(from), Until: timestamppb.New(until)}),
		},
		{
			name: "until alone: from now", args: []string{"drain", "server", "a", "--until", "+2h"},
			rpc:  map[string]handler{"Drain": reply(&pb.DrainResponse{Servers: 1, Changed: true, Until: timestamppb.New(t0.Add(2 * time.Hour))})},
			want: "scheduled: server a (1 server) drained from now until 2026-11-30 06:00 UTC; every scheduler applies it on its own clock\n",
			sent: drain(&pb.DrainRequest{Kind: "server", Name: "a", Until: timestamppb.New(t0.Add(2 * time.Hour))}),
		},
		{
			name: "a bad until", args: []string{"drain", "server", "a", "--until", "tonight"},
			wantErr: `schedctl drain: --until: "tonight" is not a time: want ` + timeForms, usage: true,
		},
		{
			name: "until before from", args: []string{"drain", "server", "a", "--from", "2026-11-30T10:00:00Z", "--until", "2026-11-30T09:00:00Z"},
			wantErr: "schedctl drain: --until: 2026-11-30 09:00 UTC is not after --from 2026-11-30 10:00 UTC", usage: true,
		},
		{
			name: "until past", args: []string{"drain", "server", "a", "--until", "2026-11-30T03:00:00Z"},
			wantErr: "schedctl drain: --until: 2026-11-30 03:00 UTC is not in the future", usage: true,
		},
		{
			name: "from past", args: []string{"drain", "server", "a", "--from", "2026-11-29 22:00", "--until", "+2h"},
			wantErr: "schedctl drain: --from: 2026-11-29 22:00 UTC is in the past; leave --from out to start now", usage: true,
		},
	})
}

func TestDrainsList(t *testing.T) {
	runCases(t, []cmdCase{{
		name: "drains with their windows", args: []string{"drains"},
		rpc: map[string]handler{"Status": reply(&pb.StatusResponse{Drains: []*pb.DrainEntry{
			{Kind: "region", Name: "hefei", Reason: "maintenance", At: timestamppb.New(t0), From: timestamppb.New(t0.Add(time.Hour)), Until: timestamppb.New(t0.Add(3 * time.Hour)), State: "pending", Forced: true},
			{Kind: "server", Name: "w", Reason: "disk", At: timestamppb.New(t0.Add(-time.Hour)), State: "active"},
		}})},
		want: "DRAINED  NAME   REASON       SINCE                 STATE    WINDOW\n" +
			"region   hefei  maintenance  2026-11-30T04:00:00Z  pending  2026-11-30T05:00:00Z – 2026-11-30T07:00:00Z\n" +
			"server   w      disk         2026-11-30T03:00:00Z  active   -\n",
		sent: []call{{method: "Status", req: &pb.StatusRequest{}}},
	}})
}

func TestMaintenance(t *testing.T) {
	from, until := t0.Add(18*time.Hour), t0.Add(24*time.Hour)
	window := &pb.MaintenanceWindow{Region: "hefei", From: timestamppb.New(from), Until: timestamppb.New(until), Reason: "maintenance: power", State: "pending", Drained: true, Withdrawn: true}
	req := &pb.MaintenanceRequest{Region: "hefei", From: timestamppb.New(from), Until: timestamppb.New(until), Reason: "power"}
	dry := &pb.MaintenanceRequest{Region: "hefei", From: timestamppb.New(from), Until: timestamppb.New(until), DryRun: true}
	route := "withdrawn by the region's schedulers in the window; the central scheduler answers the city's STBs"
	runCases(t, []cmdCase{
		{
			name: "schedule", args: []string{"maintenance", "hefei", "--from", "22:00", "--until", "04:00", "--reason", "power"},
			rpc: map[string]handler{"Maintenance": reply(&pb.MaintenanceResponse{Window: window, Changed: true, Servers: 3,
				Instances: []string{"hefei-a", "hefei-b"}, Route: route})},
			want: "maintenance of hefei scheduled from 2026-11-30 22:00 UTC until 2026-12-01 04:00 UTC (6h0m0s):\n" +
				"  region hefei drained (3 servers): no new STBs go there\n" +
				"  route: " + route + " (hefei-a, hefei-b)\n" +
				"both end by themselves at the window's end; cancel with: schedctl maintenance cancel hefei\n",
			sent: []call{{method: "Maintenance", req: req}},
		},
		{
			name: "dry run", args: []string{"maintenance", "hefei", "--from", "22:00", "--until", "+6h", "--dry-run"},
			rpc: map[string]handler{"Maintenance": reply(&pb.MaintenanceResponse{Window: window, Changed: true, Servers: 3, Route: route,
				Forecast: []*pb.DrainForecast{{Instance: "hefei-a", Region: "hefei", Sessions: 37, ToFallback: 37}}})},
			want: "dry run, nothing changed: maintenance of hefei from 2026-11-30 22:00 UTC until 2026-12-01 04:00 UTC (6h0m0s) would\n" +
				"  drain region hefei (3 servers): no new STBs go there\n" +
				"  route: " + route + "\n" +
				"  hefei-a: 37 viewers in region hefei would go to the fallback; the change of the QoE objective is not forecast for a region\n",
			sent: []call{{method: "Maintenance", req: dry}},
		},
		{
			name: "until required", args: []string{"maintenance", "hefei", "--from", "22:00"},
			wantErr: "schedctl maintenance: missing --until", usage: true,
		},
		{
			name: "list", args: []string{"maintenance", "list"},
			rpc: map[string]handler{"ListMaintenance": reply(&pb.ListMaintenanceResponse{Windows: []*pb.MaintenanceWindow{window}})},
			want: "REGION  STATE    FROM                  UNTIL                 DRAINED  ROUTE      REASON\n" +
				"hefei   pending  2026-11-30 22:00 UTC  2026-12-01 04:00 UTC  true     withdrawn  maintenance: power\n",
			sent: []call{{method: "ListMaintenance", req: &pb.ListMaintenanceRequest{}}},
		},
		{
			name: "cancel", args: []string{"maintenance", "cancel", "hefei"},
			rpc:  map[string]handler{"CancelMaintenance": reply(&pb.MaintenanceResponse{Window: window, Changed: true})},
			want: "maintenance of hefei cancelled (pending): its drain and its route's withdrawal removed; it serves and announces again\n",
			sent: []call{{method: "CancelMaintenance", req: &pb.CancelMaintenanceRequest{Region: "hefei"}}},
		},
		{
			name: "cancel, none", args: []string{"maintenance", "cancel", "wuhu"},
			rpc:  map[string]handler{"CancelMaintenance": reply(&pb.MaintenanceResponse{Window: &pb.MaintenanceWindow{Region: "wuhu"}})},
			want: "no maintenance window of wuhu to cancel\n",
			sent: []call{{method: "CancelMaintenance", req: &pb.CancelMaintenanceRequest{Region: "wuhu"}}},
		},
	})
}
