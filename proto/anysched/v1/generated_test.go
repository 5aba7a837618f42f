package anyschedv1_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedCodeIsCurrent regenerates the Go code from the .proto files
// with the pinned plugins and fails when the committed code differs: run
// `make proto` after editing a .proto file.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("protoc is not installed; .ci/run must install protobuf-compiler")
		}
		t.Skip("protoc not installed (make deps installs it)")
	}
	out := t.TempDir()
	cmd := exec.Command("../../../scripts/genproto.sh", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("genproto: %v\n%s", err, b)
	}
	for _, f := range []string{"admin.pb.go", "admin_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(out, "anysched", "v1", f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `make proto` and commit the result", f)
		}
	}
}
