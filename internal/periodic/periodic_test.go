package periodic

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunStepsUntilCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var steps atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, time.Millisecond, func() {
			if steps.Add(1) == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	// A tick due with the cancel may run a step more (select picks either).
	if got := steps.Load(); got < 3 {
		t.Fatalf("steps = %d; want 3 or more", got)
	}
}

func TestRunEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	Run(ctx, time.Hour, func() { t.Fatal("step called on an ended context") })
}

func TestRunWaitsAnInterval(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	Run(ctx, time.Hour, func() { t.Fatal("step called before its interval") })
}
