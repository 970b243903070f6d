package store

import (
	"context"
	"fmt"
	"time"
)

// Mark is a high-water mark: the highest flush (Epoch, Seq) of one agent
// that the rollup has applied to one partial-sum partition. An agent
// publishes the messages of a partition in increasing (Epoch, Seq) order,
// so a message at or below its agent's mark was applied already, even when
// it arrives again under a new broker sequence (a re-publish after the
// broker's de-duplication window).
//
// A partition has one writer (its rollup), and so do its marks: a store
// keeps one row per (Partition, Agent), written as a plain value and never
// merged.
type Mark struct {
	Partition uint32
	Agent     string
	Epoch     uint64
	Seq       uint64
	// FlushedAt is the flush time of the message that set the mark (the
	// agent's clock). A copy of an applied message was flushed no later;
	// a message below the mark flushed after it is no copy (two agents
	// share an id, or an agent's epoch went back).
	FlushedAt time.Time
	// UpdatedAt is when the mark was last written (the rollup's clock);
	// marks left untouched for long are pruned by it.
	UpdatedAt time.Time
}

// Covers reports whether a message numbered (epoch, seq) by m's agent is at
// or below m, so that it was applied already.
func (m Mark) Covers(epoch, seq uint64) bool {
	return epoch < m.Epoch || epoch == m.Epoch && seq <= m.Seq
}

// CheckMark is the check a write of mark m makes before it writes: ctx must
// not be done, validKey must accept the agent, and the partition must fit
// an int32 (Cassandra stores it as int). The error says "cannot <op>".
func CheckMark(ctx context.Context, op string, validKey func(id string) bool, m *Mark) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cannot %s: %w", op, err)
	}
	if !validKey(m.Agent) {
		return fmt.Errorf("cannot %s: %w: mark agent %q cannot be a key", op, ErrInvalid, m.Agent)
	}
	return CheckPartition(ctx, op, m.Partition)
}

// MaxPartition is the highest partition a store keys (marks, trending
// lists): Cassandra stores partitions as int.
const MaxPartition = 1<<31 - 1

// CheckPartition is the check a read or write of one partition's marks
// makes: ctx must not be done and p at most MaxPartition.
func CheckPartition(ctx context.Context, op string, p uint32) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cannot %s: %w", op, err)
	}
	if p > MaxPartition {
		return fmt.Errorf("cannot %s: %w: partition %d above %d", op, ErrInvalid, p, MaxPartition)
	}
	return nil
}
