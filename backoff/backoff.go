package backoff

import (
	"context"
	"time"
)

// Delay returns the wait before attempt attempt+1 after attempt
// consecutive failures: min·2^(attempt-1), capped at max. attempt counts
// from 1; attempts below 1 wait min.
func Delay(min, max time.Duration, attempt int) time.Duration {
	d := min
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return d
}

// Sleep waits for d or until ctx is done, and reports whether d elapsed
// (ctx is still alive). A d of zero or less does not wait.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Retry calls try until it reports that another call cannot help (again
// false), ctx ends or wait has passed, sleeping Delay(min, max, attempt)
// between calls, and returns try's last error.
func Retry(ctx context.Context, wait, min, max time.Duration, try func() (again bool, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for attempt := 1; ; attempt++ {
		again, err := try()
		if !again || !Sleep(ctx, Delay(min, max, attempt)) {
			return err
		}
	}
}
