package adminapi

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A backup taken through the admin API restores into an empty store
// through it, signed by the restoring center; a store that holds a
// province, or a backup that does not read, is refused with what was
// wrong. Both need an admin.
func TestBackupAndRestore(t *testing.T) {
	lost, lostStore := applyService(t)
	ctx, _ := as(t, authz.Admin)
	if _, err := lostStore.Apply(ctx, fixture.Weighted(t, 100), store.ApplyOptions{Signer: lost.Apply.Signer}); err != nil {
		t.Fatal(err)
	}
	b, err := lost.Backup(ctx, &pb.BackupRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if b.GetSeq() != 1 || b.GetDigest() == "" || len(b.GetKeyIds()) != 1 || b.GetKeyIds()[0] != lost.Apply.Signer.KeyID() {
		t.Errorf("backup: sequence %d, digest %q, keys %v", b.GetSeq(), b.GetDigest(), b.GetKeyIds())
	}

	rebuilt := &Service{Store: etcdtest.Start(t).Store(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Apply: lost.Apply}
	ctx, note := as(t, authz.Admin)
	r, err := rebuilt.Restore(ctx, &pb.RestoreRequest{Backup: b.GetBackup()})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetDigest() != b.GetDigest() || r.GetSeq() != 2 || r.GetEpoch() == 0 || len(r.GetForeignKeyIds()) != 0 {
		t.Errorf("restore: %v", r)
	}
	if note.Target != "seq/1" {
		t.Errorf("audit target %q, want the backup's sequence", note.Target)
	}
	st, err := rebuilt.Status(ctx, &pb.StatusRequest{})
	if err != nil || st.GetDigest() != b.GetDigest() || st.GetEpoch() != r.GetEpoch() {
		t.Errorf("status after the restore: digest %q epoch %d, %v; want %q, %d", st.GetDigest(), st.GetEpoch(), err, b.GetDigest(), r.GetEpoch())
	}

	for _, tc := range []struct {
		name   string
		backup []byte
		code   codes.Code
		says   string
	}{
		{"into a store that holds a province", b.GetBackup(), codes.FailedPrecondition, "the store is not empty"},
		{"not a backup", []byte("topology: {}"), codes.InvalidArgument, "not a backup"},
	} {
		_, err := rebuilt.Restore(ctx, &pb.RestoreRequest{Backup: tc.backup})
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want %s saying %q", tc.name, err, tc.code, tc.says)
		}
	}
	for _, m := range []string{pb.Admin_Backup_FullMethodName, pb.Admin_Restore_FullMethodName} {
		if r, _ := methodRule(m); r.need != authz.Admin || r.read {
			t.Errorf("%s: needs %v (read %v), want admin, audited", m, r.need, r.read)
		}
	}
}
