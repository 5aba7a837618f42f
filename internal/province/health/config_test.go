package health

import (
	"strings"
	"testing"
)

// The merger's file defaults are valid, and each problem is named under
// the section's path with the message config gave before.
func TestMergerOptionsValidate(t *testing.T) {
	if err := DefaultMergerOptions().Validate("health."); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
	err := MergerOptions{Rule: "pessimistic", Grace: -1, PanicThreshold: 1.5}.Validate("health.")
	for _, want := range []string{
		`health.merge: "pessimistic" is not one of optimistic, majority`,
		"health.grace: must be >= 0",
		"health.panic_threshold: 1.5 is out of range [0, 1]",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}
