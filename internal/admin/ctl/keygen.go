package ctl

import (
	"context"
	"flag"
	"fmt"

	"github.com/anysched/anysched/internal/security/signing"
)

// keygenCmd writes a topology signing key pair: the private key for the
// center (apply.signing_key_file, mode 0600) and the public key for every
// daemon that reads the topology (snapshot.trusted_keys).
func keygenCmd(_ context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	out := fs.String("signing", "", "write the private key to `FILE` and the public key to FILE.pub")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if err := need("--signing FILE", *out); err != nil {
		return err
	}
	id, err := signing.WriteKeyPair(*out, *out+".pub")
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "key id %s\nprivate key: %s (apply.signing_key_file of the center; keep it 0600)\npublic key:  %s.pub (snapshot.trusted_keys of every daemon)\n", id, *out, *out)
	return nil
}
