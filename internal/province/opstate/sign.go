package opstate

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/security/signing"
	"github.com/anysched/anysched/internal/stb/balance"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// signature is the center's signature of an operator state value
// (signing.OpState): in a drain's or drill's JSON as its last field,
// "signature", which decoders of the release before ignore; after a
// balance document as its last line, a YAML comment.
type signature struct {
	KeyID    string `json:"key_id"`
	SignedAt string `json:"signed_at"` // RFC 3339, nanoseconds
	Sig      string `json:"sig"`       // base64
}

// balanceSigPrefix starts the signature line of a balance document.
const balanceSigPrefix = "# anysched-signature "

func sign(s *signing.Signer, kind signing.OpKind, prefix, key string, body []byte, now time.Time) signature {
	now = now.UTC()
	sig := s.SignOpState(signing.OpState{Kind: kind, Province: prefix, Key: key, SignedAt: now, Value: body})
	return signature{KeyID: s.KeyID(), SignedAt: now.Format(time.RFC3339Nano), Sig: base64.StdEncoding.EncodeToString(sig)}
}

// sealJSON is body (a JSON object) with the signature appended as its last
// field; nil s leaves it unsigned.
func sealJSON(s *signing.Signer, kind signing.OpKind, prefix, key string, body []byte) ([]byte, error) {
	if s == nil {
		return body, nil
	}
	if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		return nil, fmt.Errorf("opstate: sign %s: not a JSON object", key)
	}
	sj, err := json.Marshal(sign(s, kind, prefix, key, body, time.Now()))
	if err != nil {
		return nil, err
	}
	return jsonWith(body, sj), nil
}

// jsonWith is the object body with "signature": sj as its last field.
func jsonWith(body, sj []byte) []byte {
	out := append([]byte(nil), body[:len(body)-1]...)
	if len(bytes.TrimSpace(body[1:len(body)-1])) > 0 {
		out = append(out, ',')
	}
	out = append(out, `"signature":`...)
	out = append(out, sj...)
	return append(out, '}')
}

// errMalformed: a value carries a signature, but not as the center writes it.
var errMalformed = errors.New("the signature is not where or as the center writes it")

// openJSON splits a stored JSON value into what was signed and its
// signature (nil: unsigned). The signed bytes are the value without its
// signature field, exactly as the center marshalled them, so a field a
// newer release adds is covered too.
func openJSON(value []byte) ([]byte, *signature, error) {
	var v struct {
		Sig *signature `json:"signature"`
	}
	if err := json.Unmarshal(value, &v); err != nil || v.Sig == nil {
		return value, nil, nil // unreadable is the decoder's to say
	}
	sj, err := json.Marshal(v.Sig)
	if err != nil {
		return value, nil, err
	}
	tail := append([]byte(`"signature":`), sj...)
	tail = append(tail, '}')
	if !bytes.HasSuffix(value, tail) {
		return value, v.Sig, errMalformed
	}
	body := bytes.TrimRight(value[:len(value)-len(tail)], " \t\r\n")
	body = bytes.TrimSuffix(body, []byte(","))
	return append(body[:len(body):len(body)], '}'), v.Sig, nil
}

// sealBalance is doc with the signature as a last comment line (the
// document's decoder is strict about fields, not about comments); a
// newline ends doc first.
func sealBalance(s *signing.Signer, prefix string, doc []byte) []byte {
	if s == nil || len(doc) == 0 {
		return doc
	}
	if doc[len(doc)-1] != '\n' {
		doc = append(doc[:len(doc):len(doc)], '\n')
	}
	sig := sign(s, signing.OpBalance, prefix, keyspace.KeyBalance, doc, time.Now())
	return fmt.Appendf(doc[:len(doc):len(doc)], "%skey_id=%s signed_at=%s sig=%s\n", balanceSigPrefix, sig.KeyID, sig.SignedAt, sig.Sig)
}

// openBalance splits a stored balance document into the document and its
// signature (nil: unsigned).
func openBalance(value []byte) ([]byte, *signature, error) {
	trimmed := bytes.TrimSuffix(value, []byte("\n"))
	i := bytes.LastIndexByte(trimmed, '\n') + 1 // 0: a single line
	last := string(trimmed[i:])
	if !strings.HasPrefix(last, balanceSigPrefix) {
		return value, nil, nil
	}
	var sig signature
	for _, f := range strings.Fields(strings.TrimPrefix(last, balanceSigPrefix)) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "key_id":
			sig.KeyID = v
		case "signed_at":
			sig.SignedAt = v
		case "sig":
			sig.Sig = v
		}
	}
	return value[:i], &sig, nil
}

// verify checks sig against v for the value body stored at key.
func verify(v *signing.Verifier, kind signing.OpKind, prefix, key string, body []byte, sig *signature) error {
	at, err := time.Parse(time.RFC3339Nano, sig.SignedAt)
	if err != nil {
		return fmt.Errorf("%w: signed_at: %v", errMalformed, err)
	}
	raw, err := base64.StdEncoding.DecodeString(sig.Sig)
	if err != nil {
		return fmt.Errorf("%w: sig: %v", errMalformed, err)
	}
	if len(raw) == 0 && sig.KeyID == "" {
		return fmt.Errorf("%w: empty", errMalformed)
	}
	return v.VerifyOpState(signing.OpState{Kind: kind, Province: prefix, Key: key, SignedAt: at, Value: body}, sig.KeyID, raw)
}

// refusal is why a value is not used, as the metric's reason label says it.
func refusal(err error) string {
	switch {
	case errors.Is(err, signing.ErrUnsigned):
		return "unsigned"
	case errors.Is(err, signing.ErrUnknownKey):
		return "unknown_key"
	case errors.Is(err, signing.ErrBadSignature):
		return "bad_signature"
	}
	return "malformed"
}

// kindOf is the signed kind of a key of the operator state, "" for none.
func kindOf(key string) signing.OpKind {
	switch {
	case strings.HasPrefix(key, keyspace.PrefixDrain):
		return signing.OpDrain
	case strings.HasPrefix(key, keyspace.PrefixDrill):
		return signing.OpDrill
	case key == keyspace.KeyBalance:
		return signing.OpBalance
	}
	return ""
}

// open splits any operator state value into what was signed and its signature.
func open(kind signing.OpKind, value []byte) ([]byte, *signature, error) {
	if kind == signing.OpBalance {
		return openBalance(value)
	}
	return openJSON(value)
}

// SignUnsigned signs, with s, every drain, drill and balance document that
// is stored unsigned (written by a center of the release before), each only
// if unchanged since read, keeping a drill's lease: the center does it at
// start so that schedulers requiring signatures keep the operator's state.
// It returns how many it signed.
func SignUnsigned(ctx context.Context, cli *clientv3.Client, prefix string, s *signing.Signer) (int, error) {
	n := 0
	for _, p := range []string{keyspace.PrefixDrain, keyspace.PrefixDrill, keyspace.KeyBalance} {
		resp, err := cli.Get(ctx, prefix+p, clientv3.WithPrefix())
		if err != nil {
			return n, fmt.Errorf("opstate: read %s to sign it: %w", p, err)
		}
		for _, kv := range resp.Kvs {
			key := strings.TrimPrefix(string(kv.Key), prefix)
			kind := kindOf(key)
			if kind == "" || len(kv.Value) == 0 {
				continue
			}
			body, sig, _ := open(kind, kv.Value)
			if sig != nil {
				continue
			}
			var value []byte
			if kind == signing.OpBalance {
				value = sealBalance(s, prefix, body)
			} else if value, err = sealJSON(s, kind, prefix, key, body); err != nil {
				continue // not a value this release wrote: its readers ignore it
			}
			put := clientv3.OpPut(string(kv.Key), string(value))
			if kv.Lease != 0 {
				put = clientv3.OpPut(string(kv.Key), string(value), clientv3.WithLease(clientv3.LeaseID(kv.Lease)))
			}
			tr, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).Then(put).Commit()
			if err != nil && kv.Lease != 0 {
				continue // the drill's lease ended meanwhile: so did the drill
			}
			if err != nil {
				return n, fmt.Errorf("opstate: sign %s: %w", key, err)
			}
			if tr.Succeeded {
				n++
			}
		}
	}
	return n, nil
}

// Inspect reads a stored drain or balance policy value at key as a
// scheduler would, short of verifying its signature (which needs the
// center's public keys): the signature where and as the center writes it,
// a format this release reads, a drain naming its key's target, a balance
// policy that parses. It returns the signing key id ("" unsigned) or what
// is wrong, for tools that check operator state before writing it back.
func Inspect(key string, value []byte) (keyID string, err error) {
	kind := kindOf(key)
	if kind != signing.OpDrain && kind != signing.OpBalance {
		return "", fmt.Errorf("%s: not a drain or the balance policy", key)
	}
	body, sig, err := open(kind, value)
	if err != nil {
		return "", err
	}
	if sig != nil {
		keyID = sig.KeyID
	}
	if kind == signing.OpBalance {
		if _, err := balance.ParseConfig(body); err != nil {
			return keyID, fmt.Errorf("not a balance policy: %w", err)
		}
		return keyID, nil
	}
	var d Drain
	switch err := json.Unmarshal(body, &d); {
	case err != nil:
		return keyID, fmt.Errorf("not a drain: %w", err)
	case d.Format > Format:
		return keyID, fmt.Errorf("a drain in format %d; this release reads up to %d", d.Format, Format)
	case key != keyspace.Drain(string(d.Kind), d.Name):
		return keyID, fmt.Errorf("the drain names another target (%s %s) than its key", d.Kind, d.Name)
	}
	return keyID, nil
}
