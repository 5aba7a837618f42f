package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// putLegacyState is store.PutAllocState as it was before the plan state's
// binary delta format (commit 1cbcea4): the whole plan as gzipped JSON in
// parts of 10,000 sessions, every part rewritten at every publication,
// then the previous generation's extra parts deleted. Kept here, verbatim
// but for names, so that -state-format legacy measures what it replaced.
func putLegacyState(ctx context.Context, cli *clientv3.Client, prefix, region string, st *store.AllocState) error {
	type statePart struct {
		Gen   int64             `json:"gen"`
		Part  int               `json:"part"`
		Parts int               `json:"parts"`
		State *store.AllocState `json:"state"`
	}
	const partSessions = 10_000
	gen := st.Made.UnixNano()
	n := max(1, (len(st.Sessions)+partSessions-1)/partSessions)
	base := prefix + keyspace.AllocState(region, st.Instance)
	for i := range n {
		part := &store.AllocState{Instance: st.Instance, Made: st.Made, Revision: st.Revision}
		if i == 0 {
			part.Servers, part.Services = st.Servers, st.Services
		}
		lo, hi := i*partSessions, min((i+1)*partSessions, len(st.Sessions))
		part.Sessions = st.Sessions[lo:hi]
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		if err := json.NewEncoder(zw).Encode(statePart{Gen: gen, Part: i, Parts: n, State: part}); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		if _, err := cli.Put(ctx, fmt.Sprintf("%s%04d", base, i), b.String()); err != nil {
			return fmt.Errorf("publish allocation state of %s: %w", region, err)
		}
	}
	if _, err := cli.Delete(ctx, fmt.Sprintf("%s%04d", base, n), clientv3.WithRange(clientv3.GetPrefixRangeEnd(base))); err != nil {
		return fmt.Errorf("publish allocation state of %s: %w", region, err)
	}
	return nil
}
