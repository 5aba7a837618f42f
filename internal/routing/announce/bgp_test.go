package announce_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/routing/announce"
	"github.com/anysched/anysched/internal/routing/announce/announcecfg"
	"github.com/anysched/anysched/internal/testbed/bgptest"
	"github.com/anysched/anysched/internal/testbed/wait"
	"golang.org/x/sys/unix"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newRouter(t *testing.T, asn, peerASN uint32, password string) *bgptest.Router {
	return bgptest.New(t, asn, peerASN, password)
}

func TestBGPSetIsDesiredState(t *testing.T) {
	for _, password := range []string{"", "s3cret"} {
		t.Run("md5="+strconv.FormatBool(password != ""), func(t *testing.T) {
			if password != "" && !md5Supported() {
				t.Skip("this kernel has no TCP-MD5 (TCP_MD5SIG: protocol not available)")
			}
			r := newRouter(t, 65000, 65101, password)
			sp := announce.NewBGP(announcecfg.BGP{ASN: 65101, RouterID: netip.MustParseAddr("10.1.0.1"), Peers: []announcecfg.BGPPeer{
				{Address: netip.MustParseAddr("127.0.0.1"), Port: r.Port, ASN: 65000, HoldTime: 3 * time.Second, Password: password},
			}}, logger())
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- sp.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })

			vip := netip.MustParsePrefix("198.18.0.1/32")
			if err := sp.Set(ctx, map[netip.Prefix]announce.Attrs{vip: {MED: 50, Communities: []uint32{65101<<16 | 7}}}); err != nil {
				t.Fatal(err)
			}
			wait.For(t, "session established", wait.DefaultTimeout, func() bool {
				ps := sp.Peers(ctx)
				return len(ps) == 1 && ps[0].State == "established"
			})
			wait.For(t, "route learned", wait.DefaultTimeout, func() bool {
				rs := r.Routes(t)
				return len(rs) == 1 && rs[0].Prefix == "198.18.0.1/32" && rs[0].MED == 50 && slices.Equal(rs[0].Communities, []uint32{65101<<16 | 7}) && rs[0].ASPathLen == 1
			})
			// New attributes replace the old: a standby's longer path, graceful shutdown.
			if err := sp.Set(ctx, map[netip.Prefix]announce.Attrs{vip: announce.Attrs{MED: 200, Prepend: 2}.With(announce.GracefulShutdown)}); err != nil {
				t.Fatal(err)
			}
			wait.For(t, "attributes replaced", wait.DefaultTimeout, func() bool {
				rs := r.Routes(t)
				return len(rs) == 1 && rs[0].MED == 200 && slices.Contains(rs[0].Communities, announce.GracefulShutdown) && rs[0].ASPathLen == 3
			})
			// Empty desired state withdraws.
			if err := sp.Set(ctx, nil); err != nil {
				t.Fatal(err)
			}
			wait.For(t, "route withdrawn", wait.DefaultTimeout, func() bool { return len(r.Routes(t)) == 0 })
		})
	}
}

func TestBGPStopWithdraws(t *testing.T) {
	r := newRouter(t, 65000, 65101, "")
	sp := announce.NewBGP(announcecfg.BGP{ASN: 65101, RouterID: netip.MustParseAddr("10.1.0.1"), Peers: []announcecfg.BGPPeer{
		{Address: netip.MustParseAddr("127.0.0.1"), Port: r.Port, ASN: 65000, HoldTime: 3 * time.Second},
	}}, quiet)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sp.Run(ctx) }()
	if err := sp.Set(ctx, map[netip.Prefix]announce.Attrs{netip.MustParsePrefix("198.18.0.0/26"): {}}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "route learned", wait.DefaultTimeout, func() bool { return len(r.Routes(t)) == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wait.For(t, "route gone with the session", wait.DefaultTimeout, func() bool { return len(r.Routes(t)) == 0 })
}

func logger() *slog.Logger {
	if os.Getenv("ANYSCHED_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return quiet
}

// md5Supported probes the kernel for TCP-MD5 signatures (RFC 2385) the way
// GoBGP sets them: on a listening socket.
func md5Supported() bool {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return false
	}
	defer ln.Close()
	sc, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	sig := unix.TCPMD5Sig{Keylen: 3}
	sig.Addr.Family = unix.AF_INET
	copy(sig.Addr.Data[2:6], []byte{127, 0, 0, 1})
	copy(sig.Key[:], "key")
	if err := sc.Control(func(fd uintptr) { serr = unix.SetsockoptTCPMD5Sig(int(fd), unix.IPPROTO_TCP, unix.TCP_MD5SIG, &sig) }); err != nil {
		return false
	}
	return serr == nil
}
