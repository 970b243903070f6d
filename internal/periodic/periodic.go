package periodic

import (
	"context"
	"time"
)

// Run calls step every d until ctx ends. d must be positive.
func Run(ctx context.Context, d time.Duration, step func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		step()
	}
}
