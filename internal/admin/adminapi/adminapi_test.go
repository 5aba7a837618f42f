package adminapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdmember"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestDrillEtcdMembers: the drill stops the first n of the lab's members
// through their control endpoints and says whether the quorum holds.
func TestDrillEtcdMembers(t *testing.T) {
	var mu sync.Mutex
	stopped := map[string]string{}
	released := map[string]time.Time{}
	var addrs []string
	for i := range 3 {
		name := fmt.Sprintf("etcd%d", i+1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			// A stopped member has left the group at once (the real one
			// takes up to ~7 s: etcdserver's tests).
			st := etcdmember.State{Name: name, Running: true}
			if _, ok := stopped[name]; ok {
				st = etcdmember.State{Name: name, Left: time.Now(), Until: released[name]}
			}
			switch {
			case r.Method == http.MethodGet && r.URL.Path == "/member":
			case r.Method == http.MethodPost && r.URL.Path == "/member/stop":
				stopped[name] = r.URL.Query().Get("for")
				st.Running = false
			case r.Method == http.MethodPost && r.URL.Path == "/member/release":
				released[name], _ = time.Parse(time.RFC3339Nano, r.URL.Query().Get("at"))
				st.Until = released[name]
			default:
				http.NotFound(w, r)
				return
			}
			json.NewEncoder(w).Encode(st)
		}))
		defer srv.Close()
		addrs = append(addrs, strings.TrimPrefix(srv.URL, "http://"))
	}
	leader := "etcd2"
	s := &Service{Lab: true, LabEtcdMembers: addrs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		EtcdLeader: func(context.Context) (string, error) { return leader, nil }}
	ctx := context.Background()
	for _, c := range []struct {
		members uint32
		want    []string
		quorum  bool
	}{{1, []string{"etcd1"}, true}, {2, []string{"etcd1", "etcd2"}, false}, {0, []string{"etcd1", "etcd2", "etcd3"}, false}} {
		clear(stopped)
		clear(released)
		resp, err := s.DrillEtcdLoss(ctx, &pb.DrillEtcdLossRequest{DurationSeconds: 5, Members: c.members})
		if err != nil {
			t.Fatalf("members %d: %v", c.members, err)
		}
		// Stopped with a fallback hold (5 s + the 30 s they may take to
		// leave), then released together, 5 s after the last had left.
		if fmt.Sprint(resp.GetEtcdMembersStopped()) != fmt.Sprint(c.want) || resp.GetQuorumKept() != c.quorum || resp.GetEtcdMembers() != 3 || len(stopped) != len(c.want) || stopped["etcd1"] != "35s" {
			t.Errorf("members %d: %v, stopped %v", c.members, resp, stopped)
		}
		until := resp.GetUntil().AsTime()
		for _, name := range c.want {
			if !released[name].Equal(until) {
				t.Errorf("members %d: %s released at %v, want %v (the drill's until)", c.members, name, released[name], until)
			}
		}
		if d := time.Until(until); d < 4*time.Second || d > 5*time.Second {
			t.Errorf("members %d: released %v from now, want 5 s after they left", c.members, d)
		}
	}
	// Leader first: the leader, then the others in order.
	for _, c := range []struct {
		members uint32
		want    []string
	}{{1, []string{"etcd2"}}, {2, []string{"etcd2", "etcd1"}}} {
		clear(stopped)
		resp, err := s.DrillEtcdLoss(ctx, &pb.DrillEtcdLossRequest{DurationSeconds: 5, Members: c.members, LeaderFirst: true})
		if err != nil || fmt.Sprint(resp.GetEtcdMembersStopped()) != fmt.Sprint(c.want) || resp.GetEtcdLeader() != "etcd2" || len(stopped) != len(c.want) {
			t.Errorf("leader first, members %d: %v, %v, stopped %v", c.members, resp, err, stopped)
		}
	}
	leader = "etcd9"
	if _, err := s.DrillEtcdLoss(ctx, &pb.DrillEtcdLossRequest{DurationSeconds: 5, Members: 1, LeaderFirst: true}); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "etcd9 is not behind any") {
		t.Errorf("a leader outside lab_etcd_members: %v", err)
	}
	leader = "etcd2"
	if _, err := s.DrillEtcdLoss(ctx, &pb.DrillEtcdLossRequest{DurationSeconds: 5, Members: 4}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("4 of 3 members: %v", err)
	}
	s.Lab = false
	if _, err := s.DrillEtcdLoss(ctx, &pb.DrillEtcdLossRequest{DurationSeconds: 5, Members: 1}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("outside a lab: %v", err)
	}
	s.Lab, s.LabEtcdMembers = true, append(addrs[:1:1], "127.0.0.1:1")
	_, err := s.DrillEtcdLoss(ctx, &pb.DrillEtcdLossRequest{DurationSeconds: 5})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "stopping members") || !strings.Contains(err.Error(), "127.0.0.1:1:") {
		t.Errorf("an unreachable member: %v", err)
	}
}
