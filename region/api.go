package region

import (
	"errors"

	"github.com/edgecount/edgecount/engagement"
)

// Errors the agent returns; the HTTP layer maps them to statuses.
var (
	// ErrContended means a reaction kept losing its compare-and-set to
	// concurrent writers of the same row and the agent gave up. Nothing was
	// applied; the client may retry.
	ErrContended = errors.New("reaction contended: too many concurrent changes")
	// ErrTooFrequent means a reaction's row took engagement.MaxWritersKept
	// changes within engagement.WriterHistory: one user toggling one item
	// hundreds of times in minutes. Nothing was applied; the client may
	// retry after the window.
	ErrTooFrequent = errors.New("reaction changed too often")
	// ErrStopping means the agent is shutting down and takes no more writes.
	ErrStopping = errors.New("agent is stopping")
)

// Increment is one validated counter increment.
type Increment struct {
	ContentID string
	Counter   string
	Delta     int64
}

// ReactResult is what a reaction did.
type ReactResult struct {
	Previous engagement.Action
	Action   engagement.Action
	// Version of the row after the call (0 when no row remains).
	Version int64
	// Changed is false for a repeat of the current action.
	Changed bool
}

// Directory tells how many shards a counter gets. It is consulted when a
// counter is created, so it is off the per-increment path. Implementations
// must be safe for concurrent use and must not block.
type Directory interface {
	Shards(contentID, counter string) int
}
