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

	"github.com/anysched/anysched/internal/etcdserver"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestDrillEtcdMembers: the drill stops the first n of the lab's members
// through their control endpoints and says whether the quorum holds.
func TestDrillEtcdMembers(t *testing.T) {
	var mu sync.Mutex
	stopped := map[string]string{}
	var addrs []string
	for i := range 3 {
		name := fmt.Sprintf("etcd%d", i+1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && r.URL.Path == "/member" {
				json.NewEncoder(w).Encode(etcdserver.MemberState{Name: name, Running: true})
				return
			}
			if r.Method != http.MethodPost || r.URL.Path != "/member/stop" {
				http.NotFound(w, r)
				return
			}
			mu.Lock()
			stopped[name] = r.URL.Query().Get("for")
			mu.Unlock()
			json.NewEncoder(w).Encode(etcdserver.MemberState{Name: name, Until: time.Now().Add(time.Minute)})
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
		resp, err := s.DrillEtcdLoss(ctx, &pb.DrillEtcdLossRequest{DurationSeconds: 5, Members: c.members})
		if err != nil {
			t.Fatalf("members %d: %v", c.members, err)
		}
		if fmt.Sprint(resp.GetEtcdMembersStopped()) != fmt.Sprint(c.want) || resp.GetQuorumKept() != c.quorum || resp.GetEtcdMembers() != 3 || len(stopped) != len(c.want) || stopped["etcd1"] != "5s" {
			t.Errorf("members %d: %v, stopped %v", c.members, resp, stopped)
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
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "stopped [etcd1]; could not stop 127.0.0.1:1") {
		t.Errorf("an unreachable member: %v", err)
	}
}
