package obs_test

import (
	"log/slog"
	"testing"

	"github.com/anysched/anysched/internal/testbed/logtest"
	"github.com/anysched/anysched/internal/wiring/obs"
	"go.uber.org/zap/zapcore"
)

// TestZapLoggerDemoting: an entry the demote function picks counts as
// DEBUG (dropped below min); others keep their level.
func TestZapLoggerDemoting(t *testing.T) {
	rec := logtest.New()
	quiet := false
	z := obs.ZapLoggerDemoting(rec.Logger(), zapcore.WarnLevel, func(e zapcore.Entry) bool { return quiet && e.Message == "expected" })
	z.Error("expected")
	quiet = true
	z.Error("expected")
	z.Error("other")
	z.Info("chatter")
	var got []string
	for _, r := range rec.Records(slog.LevelDebug) {
		got = append(got, r.Level.String()+" "+r.Message)
	}
	if len(got) != 2 || got[0] != "ERROR expected" || got[1] != "ERROR other" {
		t.Errorf("logged %q, want the first \"expected\" and \"other\" at ERROR only", got)
	}
}
