package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/province/backup"
	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// backupCmd writes what rebuilding the province needs to a file (admin):
// the topology and its history, the operator state, the signing key ids
// and the store's roles; no secret.
func backupCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	out := fs.String("out", "", "the file to write (required; written whole or not at all, mode 0600)")
	o := outputFlag(fs, formatTable, formatJSON)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return usagef("missing --out FILE")
	}
	resp, err := e.admin.Backup(ctx, &pb.BackupRequest{})
	if err != nil {
		return err
	}
	if err := writeWhole(*out, resp.GetBackup()); err != nil {
		return err
	}
	saved := resp.GetBackup()
	resp.Backup = nil // the file holds it; the summary is what is printed
	return render(e.out, o, resp, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "backup %s: %d bytes, %d keys at store revision %d; topology sequence %d (%s), %d drain(s), %d role(s) recorded, signed by %s\n",
			*out, len(saved), resp.GetKeys(), resp.GetRevision(), resp.GetSeq(), shortDigest(resp.GetDigest()), resp.GetDrains(), resp.GetRoles(), orDash(strings.Join(resp.GetKeyIds(), ",")))
		return err
	})
}

// writeWhole writes data to path through a temporary file renamed over it.
func writeWhole(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// restoreCmd writes a backup into an empty store (admin): checked whole
// first, refused whole with what was wrong.
func restoreCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	file := fs.String("f", "", "the backup file (schedctl backup --out)")
	force := fs.Bool("force", false, "replace the topology, drains and balance policy the store holds")
	yes := fs.Bool("yes", false, "with --force, replace without asking (scripts)")
	o := outputFlag(fs, formatTable, formatJSON)
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return usagef("missing -f FILE")
	}
	data, err := readAtMost(*file, backup.MaxBytes)
	if err != nil {
		return err
	}
	if *force && !*yes {
		if err := confirm(e, *file, "replace the store's topology, drains and balance policy with the backup's?"); err != nil {
			return err
		}
	}
	resp, err := e.admin.Restore(ctx, &pb.RestoreRequest{Backup: data, Force: *force})
	if err != nil {
		return err
	}
	return render(e.out, o, resp, func(w io.Writer) error {
		fmt.Fprintf(w, "restored %s: %d keys, %d drain(s); topology %s current at revision %d, sequence %d of the store founded %s\n",
			*file, resp.GetKeys(), resp.GetDrains(), shortDigest(resp.GetDigest()), resp.GetRevision(), resp.GetSeq(),
			time.Unix(0, resp.GetEpoch()).UTC().Format(time.RFC3339))
		for _, d := range resp.GetRoleDifferences() {
			fmt.Fprintf(w, "warning: %s\n", d)
		}
		for _, id := range resp.GetForeignKeyIds() {
			fmt.Fprintf(w, "warning: signed by key %s, which this center does not sign with: readers must trust it (snapshot.trusted_keys)\n", id)
		}
		return nil
	})
}
