package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdauth"
	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/netconfig"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// KeyWrites are the puts the load saw under one part of the key layout
// (internal/etcd/keyspace): each key's version at the end less at the
// start, summed.
type KeyWrites struct {
	Prefix string `json:"prefix"`
	Keys   int    `json:"keys"`  // keys under it at the end
	Puts   int64  `json:"puts"`  // during the load
	Bytes  int64  `json:"bytes"` // its keys' values at the end, summed
	MaxVal int64  `json:"max_value"`
}

// keyVersions reads every key's version and value size (as the lab's root
// user, from the core's namespace).
func keyVersions(ctx context.Context, ns, dir string, endpoints []string) (map[string][2]int64, error) {
	pkiDir := filepath.Join(dir, "pki")
	cert, err := tls.LoadX509KeyPair(filepath.Join(pkiDir, etcdauth.RootUser+".pem"), filepath.Join(pkiDir, etcdauth.RootUser+"-key.pem"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(pkiDir, "ca.pem"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		var c net.Conn
		err := netconfig.InNamespace(ns, func() error {
			var err error
			c, err = (&net.Dialer{Timeout: 3 * time.Second}).DialContext(ctx, "tcp", addr)
			return err
		})
		return c, err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second,
		TLS:         &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12},
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(dial)}})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("etcd keys: %w", err)
	}
	out := make(map[string][2]int64, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = [2]int64{kv.Version, int64(len(kv.Value))}
	}
	return out, nil
}

// prefixOf is the part of the key layout a key is under (its keyspace
// prefix, wherever the deployment's root puts it).
func prefixOf(key string) string {
	best := ""
	for _, p := range keyspace.All() {
		if i := strings.Index(key, p); i >= 0 && (i == 0 || key[i-1] == '/') && len(p) > len(best) {
			best = p
		}
	}
	if best == "" {
		return "(other)"
	}
	return best
}

// keyWrites compares two readings of the keys.
func keyWrites(before, after map[string][2]int64) []KeyWrites {
	by := map[string]*KeyWrites{}
	for k, v := range after {
		p := prefixOf(k)
		w := by[p]
		if w == nil {
			w = &KeyWrites{Prefix: p}
			by[p] = w
		}
		w.Keys++
		w.Bytes += v[1]
		w.MaxVal = max(w.MaxVal, v[1])
		old := before[k][0]
		if v[0] >= old {
			w.Puts += v[0] - old
		} else { // deleted and made again: its versions since
			w.Puts += v[0]
		}
	}
	out := make([]KeyWrites, 0, len(by))
	for _, w := range by {
		out = append(out, *w)
	}
	slices.SortFunc(out, func(a, b KeyWrites) int {
		if a.Puts != b.Puts {
			return int(b.Puts - a.Puts)
		}
		return strings.Compare(a.Prefix, b.Prefix)
	})
	return out
}
