package etcdtest_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/wait"
)

// TestRestartKeepsTheEndpoint: a client made before an outage works again
// after Restart, and nobody can take the port meanwhile.
func TestRestartKeepsTheEndpoint(t *testing.T) {
	e := etcdtest.Start(t)
	before := e.Endpoint()
	cli := e.Client()
	put := func(v string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := cli.Put(ctx, "k", v)
		return err
	}
	if err := put("1"); err != nil {
		t.Fatal(err)
	}

	e.Stop()
	if e.Running {
		t.Fatal("Running after Stop")
	}
	if err := put("2"); err == nil {
		t.Fatal("a write succeeded with etcd stopped")
	}
	if c, err := net.Dial("tcp", e.ClientAddr()); err == nil {
		c.Close()
		t.Fatal("the stopped server's port accepts connections")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial the stopped server: %v, want connection refused", err)
	}
	if ln, err := net.Listen("tcp", e.ClientAddr()); err == nil {
		ln.Close()
		t.Fatal("another listener took the stopped server's port")
	}

	e.Restart()
	if e.Endpoint() != before {
		t.Fatalf("endpoint %s after Restart, was %s", e.Endpoint(), before)
	}
	wait.ForErr(t, "the old client writes again", wait.DefaultTimeout, func() error { return put("3") })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := e.Client().Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "3" {
		t.Fatalf("after the restart: %v %v", resp, err)
	}
}
