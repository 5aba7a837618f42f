package app_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdauth"
	"github.com/anysched/anysched/internal/etcd/etcdclient"
	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/security/pki"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/anysched/anysched/internal/wiring/config"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// TestCenterEmbeddedEtcdAuth: with etcd.embedded.tls the center's etcd
// serves https with client certificates and roles, provisioned at start
// (and again, changing nothing, at a restart). Before, it was plaintext
// without auth: anyone reaching client_listen wrote a drain. A regional
// scheduler runs on its own confined identity.
func TestCenterEmbeddedEtcdAuth(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("etcd CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile, _, err := ca.WriteCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(name string, l pki.Leaf) config.ClientTLS {
		c, k, err := ca.WriteLeaf(dir, name, l)
		if err != nil {
			t.Fatal(err)
		}
		return config.ClientTLS{CAFile: caFile, CertFile: c, KeyFile: k}
	}
	srv := leaf("server", pki.Leaf{CN: "etcd", Hosts: []string{"127.0.0.1"}, Server: true})
	cc := centerConfig(t)
	cc.Etcd.Embedded.TLS = config.ServerTLS{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: caFile}
	cc.Etcd.Embedded.Identities = []string{"anysched-regional.hefei.hefei-1"}
	cc.Etcd.TLS = leaf("center", pki.Leaf{CN: etcdauth.CenterIdentity, Client: true})
	withSigningKey(t, &cc)                      // etcd with users: others may write it, so the center signs
	cc.Etcd.WriteGuard.BytesPerMinute = 1 << 20 // the flood below is cut within a few MiB
	if err := cc.Validate(); err != nil {
		t.Fatal(err)
	}
	stop := runCenter(t, &cc)
	endpoint := "https://" + cc.Etcd.Embedded.ClientListen

	connect := func(tls config.ClientTLS) *store.Store {
		cli, err := etcdclient.Connect(config.Etcd{DialTimeout: 2 * time.Second, TLS: tls}, []string{endpoint}, quiet)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return store.New(cli, cc.Etcd.Prefix, quiet)
	}
	drain := func(st *store.Store) error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		return opstate.SetDrain(ctx, st.Client(), cc.Etcd.Prefix, nil, opstate.Drain{Kind: opstate.DrainRegion, Name: "hefei"})
	}
	if err := drain(connect(config.ClientTLS{CAFile: caFile})); err == nil {
		t.Error("a client without a certificate wrote a drain")
	}
	if err := drain(connect(leaf("stranger", pki.Leaf{CN: "anysched-regional.hefei.stranger", Client: true}))); err == nil {
		t.Error("an unprovisioned certificate wrote a drain")
	}
	cityTLS := leaf("hefei-1", pki.Leaf{CN: "anysched-regional.hefei.hefei-1", Client: true})
	if err := drain(connect(cityTLS)); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("a city's certificate writing a drain: %v, want permission denied", err)
	}

	// Restarted, the center provisions again (as root-capable
	// anysched-center, auth already on) and comes up.
	stop()
	runCenter(t, &cc)
	endpoint = "https://" + cc.Etcd.Embedded.ClientListen

	rc := regionalConfig(t, cc, "hefei")
	rc.InstanceID = "hefei-1"
	rc.Etcd.Endpoints, rc.Etcd.TLS = []string{endpoint}, cityTLS
	if err := rc.Validate(); err != nil {
		t.Fatal(err)
	}
	runRegional(t, &rc)
	center := connect(cc.Etcd.TLS)
	wait.For(t, "the regional's registration, written as its own etcd user", 10*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ins, err := center.Instances(ctx)
		for _, in := range ins {
			if in.ID == "hefei-1" {
				return err == nil
			}
		}
		return false
	})

	// A compromised city host writing its own plan-state keys over and
	// over (within its role) until etcd's quota fills: the center's write
	// guard revokes its writes and says so in status.
	flood := connect(cityTLS)
	n := 0
	wait.For(t, "the flooding city's writes revoked by the center", 30*time.Second, func() bool {
		n++
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := flood.Client().Put(ctx, cc.Etcd.Prefix+keyspace.AllocState("hefei", "hefei-1")+fmt.Sprintf("flood-%d", n), strings.Repeat("x", 200<<10))
		return errors.Is(err, rpctypes.ErrPermissionDenied)
	})
	waitUp(t, "status names the revoked writer", func() bool {
		out, _ := schedctl(t, cc.GRPC.Listen, "status")
		return strings.Contains(out, "etcd writes of anysched-regional.hefei.hefei-1 revoked")
	})
}
