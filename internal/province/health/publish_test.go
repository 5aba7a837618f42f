package health

import "testing"

// The snapshot can reach the agent before the publisher's Run has started;
// the new target count must still wake the writer once Run starts.
func TestPublisherSetTargetCountBeforeRun(t *testing.T) {
	p := &Publisher{}
	p.SetTargetCount(3)
	p.init() // what Run does first
	select {
	case <-p.kick:
	default:
		t.Fatal("SetTargetCount before Run did not wake the writer")
	}
	if p.Info.Targets != 3 {
		t.Fatalf("Targets = %d, want 3", p.Info.Targets)
	}
}

// SetTargetCount and Run's initialisation run on different goroutines (the
// snapshot syncer and the agent); the race run fails here if they race.
func TestPublisherSetTargetCountConcurrentWithRun(t *testing.T) {
	p := &Publisher{}
	done := make(chan struct{})
	go func() { p.SetTargetCount(4); close(done) }()
	p.init()
	<-done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Info.Targets != 4 {
		t.Fatalf("Targets = %d, want 4", p.Info.Targets)
	}
}
