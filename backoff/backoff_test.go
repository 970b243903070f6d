package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	tests := []struct {
		min, max time.Duration
		attempt  int
		want     time.Duration
	}{
		{10 * time.Millisecond, 100 * time.Millisecond, 0, 10 * time.Millisecond},
		{10 * time.Millisecond, 100 * time.Millisecond, 1, 10 * time.Millisecond},
		{10 * time.Millisecond, 100 * time.Millisecond, 2, 20 * time.Millisecond},
		{10 * time.Millisecond, 100 * time.Millisecond, 3, 40 * time.Millisecond},
		{10 * time.Millisecond, 100 * time.Millisecond, 5, 100 * time.Millisecond},
		{10 * time.Millisecond, 100 * time.Millisecond, 1000, 100 * time.Millisecond},
		// The Redis directory's policy: 50 ms doubling to one second.
		{50 * time.Millisecond, time.Second, 5, 800 * time.Millisecond},
		{50 * time.Millisecond, time.Second, 6, time.Second},
		{0, time.Second, 10, 0},
	}
	for _, tt := range tests {
		if got := Delay(tt.min, tt.max, tt.attempt); got != tt.want {
			t.Errorf("Delay(%v, %v, %d) = %v, want %v", tt.min, tt.max, tt.attempt, got, tt.want)
		}
	}
}

func TestSleep(t *testing.T) {
	ctx := context.Background()
	if !Sleep(ctx, time.Millisecond) {
		t.Error("Sleep(live ctx, 1ms) = false, want true")
	}
	if !Sleep(ctx, 0) {
		t.Error("Sleep(live ctx, 0) = false, want true")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	start := time.Now()
	if Sleep(cancelled, time.Hour) {
		t.Error("Sleep(cancelled ctx, 1h) = true, want false")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Sleep(cancelled ctx, 1h) took %v, want at once", took)
	}
	if Sleep(cancelled, 0) {
		t.Error("Sleep(cancelled ctx, 0) = true, want false")
	}
}

func TestRetry(t *testing.T) {
	errBusy := errors.New("busy")
	calls := 0
	err := Retry(context.Background(), time.Minute, time.Millisecond, 2*time.Millisecond, func() (bool, error) {
		calls++
		if calls < 3 {
			return true, errBusy
		}
		return false, nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Retry = %v after %d calls; want nil after 3", err, calls)
	}
	calls = 0
	err = Retry(context.Background(), 20*time.Millisecond, time.Millisecond, 2*time.Millisecond, func() (bool, error) {
		calls++
		return true, errBusy
	})
	if !errors.Is(err, errBusy) || calls < 2 {
		t.Fatalf("Retry past its wait = %v after %d calls; want busy after several", err, calls)
	}
}
