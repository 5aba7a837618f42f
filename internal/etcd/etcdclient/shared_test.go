package etcdclient_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdclient"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
)

// TestSharedAsksEtcd: a loopback endpoint says nothing of who else writes
// etcd; etcd does. One loopback member without auth is private; with
// authentication on, others may write it.
func TestSharedAsksEtcd(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	why, err := etcdclient.Shared(ctx, cli)
	if err != nil || why != "" {
		t.Fatalf("one loopback member, auth off: %q, %v; want private", why, err)
	}
	e.EnableAuth()
	why, err = etcdclient.Shared(ctx, cli)
	if err != nil || !strings.Contains(why, "authentication enabled") {
		t.Fatalf("auth on: %q, %v; want shared for its authentication", why, err)
	}
}
