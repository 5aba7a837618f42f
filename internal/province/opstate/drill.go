package opstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/security/signing"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// centerName is how the central scheduler is named as a drill target;
// topology validation reserves it, so no region can take it.
const centerName = topology.CenterName

// DrillTarget is whose route a failover drill withdraws: the central
// scheduler's aggregate or one region's schedulers' /32.
type DrillTarget struct {
	Center bool
	Region string // when !Center
}

// CenterTarget is the central scheduler.
var CenterTarget = DrillTarget{Center: true}

// RegionTarget is the schedulers of region.
func RegionTarget(region string) DrillTarget { return DrillTarget{Region: region} }

// ParseDrillTarget reads "center" or a region name.
func ParseDrillTarget(s string) (DrillTarget, error) {
	switch s {
	case "":
		return DrillTarget{}, fmt.Errorf("region: required (a region name, or %q for the central scheduler)", centerName)
	case centerName:
		return CenterTarget, nil
	}
	return RegionTarget(s), nil
}

// String is the target's name in keys, logs and the API: "center" or the region.
func (t DrillTarget) String() string {
	if t.Center {
		return centerName
	}
	return t.Region
}

// MarshalText implements encoding.TextMarshaler.
func (t DrillTarget) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (t *DrillTarget) UnmarshalText(b []byte) error {
	v, err := ParseDrillTarget(string(b))
	if err == nil {
		*t = v
	}
	return err
}

// Drill is a failover drill in force (key drill/<target>, under a lease that
// ends shortly after Until, so a forgotten drill cleans itself up). A
// maintenance window's drill (Maintenance) may begin later than it is
// written and last up to MaxWindow; any other, at most MaxDrill.
type Drill struct {
	Target      DrillTarget `json:"region"`
	Until       time.Time   `json:"until"`
	Started     time.Time   `json:"started"`
	Maintenance bool        `json:"maintenance,omitempty"`
	// Format is the document's format version (Format; absent is 1).
	Format int `json:"format,omitempty"`
}

// drillLeaseSlack keeps a drill's key a little past its end, so every
// scheduler has read Until before the key goes.
const drillLeaseSlack = 10 * time.Second

// StartDrill records a drill for target lasting d, signed by signer (nil:
// unsigned).
func StartDrill(ctx context.Context, cli *clientv3.Client, prefix string, signer *signing.Signer, target DrillTarget, d time.Duration) (Drill, error) {
	return StartDrillIf(ctx, cli, prefix, signer, target, d, 0)
}

// ErrDrillsChanged: another drill started or ended since the drills were
// read; read them again and decide again.
var ErrDrillsChanged = errors.New("opstate: the drills in force changed meanwhile")

// StartDrillIf records a drill for target lasting d, provided no drill key
// changed after etcd revision rev (from ListDrills; 0: unconditionally), so
// that a decision taken on the drills in force holds when it is written.
func StartDrillIf(ctx context.Context, cli *clientv3.Client, prefix string, signer *signing.Signer, target DrillTarget, d time.Duration, rev int64) (Drill, error) {
	now := time.Now().UTC()
	dr := Drill{Target: target, Started: now, Until: now.Add(d)}
	return dr, putDrill(ctx, cli, prefix, signer, dr, rev)
}

// ScheduleDrill records dr as given (a maintenance window's drill, which
// may start later), on the same terms as StartDrillIf; its key lasts until
// shortly after dr.Until.
func ScheduleDrill(ctx context.Context, cli *clientv3.Client, prefix string, signer *signing.Signer, dr Drill, rev int64) error {
	if !dr.Until.After(dr.Started) {
		return fmt.Errorf("opstate: drill until: %s is not after its start %s", dr.Until.Format(time.RFC3339), dr.Started.Format(time.RFC3339))
	}
	if !dr.Until.After(time.Now()) {
		return fmt.Errorf("opstate: drill until: %s is past", dr.Until.Format(time.RFC3339))
	}
	return putDrill(ctx, cli, prefix, signer, dr, rev)
}

func putDrill(ctx context.Context, cli *clientv3.Client, prefix string, signer *signing.Signer, dr Drill, rev int64) error {
	b, err := json.Marshal(dr)
	if err != nil {
		return fmt.Errorf("opstate: drill: %w", err)
	}
	key := keyspace.Drill(dr.Target.String())
	if b, err = sealJSON(signer, signing.OpDrill, prefix, key, b); err != nil {
		return err
	}
	lease, err := cli.Grant(ctx, int64((time.Until(dr.Until)+drillLeaseSlack)/time.Second))
	if err != nil {
		return err
	}
	put := clientv3.OpPut(prefix+key, string(b), clientv3.WithLease(lease.ID))
	if rev == 0 {
		_, err = cli.Do(ctx, put)
		return err
	}
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(prefix+keyspace.PrefixDrill).WithPrefix(), "<", rev+1)).Then(put).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		_, _ = cli.Revoke(ctx, lease.ID)
		return ErrDrillsChanged
	}
	return nil
}

// ClearDrill ends target's drill now by deleting its key (every scheduler
// announces again at its next check); existed says whether there was one.
func ClearDrill(ctx context.Context, cli *clientv3.Client, prefix string, target DrillTarget) (existed bool, err error) {
	resp, err := cli.Delete(ctx, prefix+keyspace.Drill(target.String()))
	if err != nil {
		return false, err
	}
	return resp.Deleted > 0, nil
}

// ListDrills reads the drills recorded (including any just ended, whose
// key lingers a few seconds), and the etcd revision it read them at.
func ListDrills(ctx context.Context, cli *clientv3.Client, prefix string) ([]Drill, int64, error) {
	resp, err := cli.Get(ctx, prefix+keyspace.PrefixDrill, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("opstate: list drills: %w", err)
	}
	var out []Drill
	for _, kv := range resp.Kvs {
		var dr Drill
		body, _, _ := openJSON(kv.Value) // unverified: a forged drill only makes the center refuse more drills
		if err := json.Unmarshal(body, &dr); err != nil {
			continue // a key a newer release wrote: it does not decide here
		}
		out = append(out, dr)
	}
	return out, resp.Header.Revision, nil
}
