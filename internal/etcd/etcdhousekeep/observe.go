package etcdhousekeep

import (
	"context"
	"fmt"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// observation is one reading of the cluster: every member's status and
// the alarms.
type observation struct {
	revision int64
	members  []Member
	alarms   []*pb.AlarmMember
}

func (o observation) alarmed(t pb.AlarmType) bool {
	return slices.ContainsFunc(o.alarms, func(a *pb.AlarmMember) bool { return a.Alarm == t })
}

// ordered is the members in defragmentation order: followers first, the
// leader last, so that leadership moves at most once.
func (o observation) ordered() []Member {
	ms := slices.Clone(o.members)
	slices.SortStableFunc(ms, func(a, b Member) int {
		switch {
		case a.Leader == b.Leader:
			return 0
		case b.Leader:
			return -1
		}
		return 1
	})
	return ms
}

// observe reads the members, each one's status and the alarms. A member
// is reached on the client's own endpoint for it where there is one (its
// advertised URL may be a wildcard, or named otherwise in the server's
// certificate), else on the URL it advertises. A member that does not
// answer is listed with its error; failing to list the members or the
// alarms fails the reading.
func (h *Housekeeper) observe(ctx context.Context) (observation, error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	ml, err := h.cli.MemberList(cctx)
	if err != nil {
		return observation{}, fmt.Errorf("member list: %w", err)
	}
	al, err := h.cli.AlarmList(cctx)
	if err != nil {
		return observation{}, fmt.Errorf("alarm list: %w", err)
	}
	o := observation{alarms: al.Alarms}
	seen := map[uint64]*pb.StatusResponse{}
	endpoint := map[uint64]string{}
	for _, ep := range h.cli.Endpoints() {
		if st, err := h.cli.Status(cctx, ep); err == nil && seen[st.Header.MemberId] == nil {
			seen[st.Header.MemberId], endpoint[st.Header.MemberId] = (*pb.StatusResponse)(st), ep
		}
	}
	for _, mm := range ml.Members {
		m := Member{ID: mm.ID, Name: mm.Name, Endpoint: endpoint[mm.ID]}
		if m.Name == "" {
			m.Name = fmt.Sprintf("%x", mm.ID) // not started yet
		}
		st := seen[mm.ID]
		if st == nil && len(mm.ClientURLs) > 0 {
			m.Endpoint = mm.ClientURLs[0]
			s, err := h.cli.Status(cctx, m.Endpoint)
			if err != nil {
				m.Err = err.Error()
			} else {
				st = (*pb.StatusResponse)(s)
			}
		}
		if st != nil {
			m.Leader = st.Leader == mm.ID
			m.DBSize, m.DBSizeInUse, m.Quota = st.DbSize, st.DbSizeInUse, st.DbSizeQuota
			o.revision = max(o.revision, st.Header.Revision)
		} else if m.Err == "" {
			m.Err = "no client URL"
		}
		o.members = append(o.members, m)
	}
	return o, nil
}

// reobserve reads the cluster again after a change, keeping prev when
// that fails (the next round reads again).
func (h *Housekeeper) reobserve(ctx context.Context, prev observation) observation {
	o, err := h.observe(ctx)
	if err != nil {
		return prev
	}
	return o
}
