package etcdclient

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/anysched/anysched/internal/stb/netutil"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const authOn = "etcd has authentication enabled (other users may write it)"

// Shared reports why the etcd cli talks to may be written by others than
// this host ("" when it is one member, auth off, serving only loopback):
// more than one member, authentication enabled, or a member serving
// clients beyond loopback. A daemon configured for loopback alone may
// still reach a member of a cluster through a loopback endpoint; what the
// cluster says of itself decides whether documents must be signed.
func Shared(ctx context.Context, cli *clientv3.Client) (string, error) {
	ml, err := cli.MemberList(ctx)
	if errors.Is(err, rpctypes.ErrUserEmpty) || errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrInvalidAuthToken) {
		return authOn, nil // it asks who we are: it has users
	}
	if err != nil {
		return "", fmt.Errorf("etcd member list: %w", err)
	}
	if n := len(ml.Members); n > 1 {
		return fmt.Sprintf("etcd has %d members", n), nil
	}
	for _, m := range ml.Members {
		for _, cu := range m.ClientURLs {
			if u, err := url.Parse(cu); err != nil || !netutil.LoopbackHost(u.Hostname()) {
				return fmt.Sprintf("etcd member %s serves clients at %s", m.Name, strings.Join(m.ClientURLs, ", ")), nil
			}
		}
	}
	as, err := cli.AuthStatus(ctx)
	if err != nil {
		return "", fmt.Errorf("etcd auth status: %w", err)
	}
	if as.Enabled {
		return authOn, nil
	}
	return "", nil
}
