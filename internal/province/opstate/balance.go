package opstate

import (
	"context"
	"errors"
	"fmt"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/security/signing"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// StoredBalance is the balance policy document as etcd holds it.
type StoredBalance struct {
	// Document is the YAML as written; empty when none is stored (the
	// defaults apply).
	Document []byte
	// Revision is the key's mod revision; 0 when none is stored.
	Revision int64
}

// ReadBalance reads the stored balance policy document.
func ReadBalance(ctx context.Context, cli *clientv3.Client, prefix string) (StoredBalance, error) {
	resp, err := cli.Get(ctx, prefix+keyspace.KeyBalance)
	if err != nil {
		return StoredBalance{}, fmt.Errorf("opstate: read balance policy: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return StoredBalance{}, nil
	}
	kv := resp.Kvs[0]
	doc, _, _ := openBalance(kv.Value) // the document as the operator wrote it, without the center's signature
	return StoredBalance{Document: doc, Revision: kv.ModRevision}, nil
}

// ErrBalanceChanged: the stored balance policy document is not the one
// read (someone changed it meanwhile); read it again and decide again.
var ErrBalanceChanged = errors.New("opstate: the balance policy document changed meanwhile")

// SetBalance stores doc as the balance policy document (an empty doc
// deletes it: the defaults), provided the stored document is still the one
// read at revision base (its mod revision; 0: none was stored), signed by
// signer (nil: unsigned) in a last comment line. Validate
// doc first: the watchers fall back to the defaults on an invalid one.
func SetBalance(ctx context.Context, cli *clientv3.Client, prefix string, signer *signing.Signer, doc []byte, base int64) (rev int64, err error) {
	key := prefix + keyspace.KeyBalance
	op := clientv3.OpPut(key, string(sealBalance(signer, prefix, doc)))
	if len(doc) == 0 {
		op = clientv3.OpDelete(key)
	}
	// A key never written (or deleted) has mod revision 0.
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", base)).Then(op).Commit()
	if err != nil {
		return 0, fmt.Errorf("opstate: store balance policy: %w", err)
	}
	if !resp.Succeeded {
		return 0, ErrBalanceChanged
	}
	if len(doc) == 0 {
		return 0, nil
	}
	return resp.Header.Revision, nil
}
