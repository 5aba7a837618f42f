package app_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdclient"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/wiring/config"
)

// TestSchedulerRefusesUnsignedDrain: a city scheduler with the center's key
// in snapshot.trusted_keys and snapshot.opstate_signatures: required does
// not take a drain written straight into etcd: it says so in its metrics.
func TestSchedulerRefusesUnsignedDrain(t *testing.T) {
	cc := centerConfig(t)
	withSigningKey(t, &cc)
	runCenter(t, &cc)
	waitUp(t, "center admin API", func() bool { _, err := schedctl(t, cc.GRPC.Listen, "status"); return err == nil })
	rc := regionalConfig(t, cc, topogen.Cities(nil, 3)[0].Name)
	rc.Snapshot.OpstateSignatures = config.OpstateRequired
	runRegional(t, &rc)

	cli, err := etcdclient.Connect(config.Etcd{DialTimeout: 2 * time.Second}, []string{"http://" + cc.Etcd.Embedded.ClientListen}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := opstate.SetDrain(ctx, cli, cc.Etcd.Prefix, nil, opstate.Drain{Kind: opstate.DrainRegion, Name: rc.Region, Forced: true}); err != nil {
		t.Fatal(err)
	}
	want := `anysched_opstate_refused_total{kind="drain",reason="unsigned"} 1`
	waitUp(t, "the unsigned drain refused by the city", func() bool {
		resp, err := http.Get("http://" + rc.Admin.Listen + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), want)
	})
}
