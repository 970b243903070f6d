package store

import (
	"context"
	"fmt"
	"time"
)

// Mark is a high-water mark: the highest flush sequence of one run (Epoch)
// of one agent that the rollup has applied to one partial-sum partition.
// A run publishes the messages of a partition in increasing Seq order, so
// a message of the run at or below the mark was applied already, even when
// it arrives again under a new broker sequence (a re-publish after the
// broker's de-duplication window). Marks are kept per run, not per agent:
// a restarted agent may re-publish its last run's messages after its new
// run's, and two runs that wrongly share an agent id are still counted
// apart, because their message ids differ by epoch.
//
// A partition has one writer (its rollup), and so do its marks: a store
// keeps one row per (Partition, Agent, Epoch), written as a plain value and
// never merged.
type Mark struct {
	Partition uint32
	Agent     string
	Epoch     uint64
	Seq       uint64
	// FlushedAt is the flush time of the message that set the mark (the
	// agent's clock). A copy of an applied message was flushed no later;
	// a message below the mark flushed after it is no copy (two agents
	// share an id and an epoch, or a run's sequence went back).
	FlushedAt time.Time
	// UpdatedAt is when the mark was last written (the rollup's clock);
	// marks left untouched for long are pruned by it.
	UpdatedAt time.Time
}

// Covers reports whether a message numbered (epoch, seq) by m's agent is at
// or below m in m's run, so that it was applied already.
func (m Mark) Covers(epoch, seq uint64) bool {
	return epoch == m.Epoch && seq <= m.Seq
}

// MarkKey names one mark of a partition.
type MarkKey struct {
	Agent string
	Epoch uint64
}

// Key returns the key of m in its partition.
func (m Mark) Key() MarkKey { return MarkKey{Agent: m.Agent, Epoch: m.Epoch} }

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

// CheckMarkKeys is the check a delete of marks keys of partition p makes:
// ctx must not be done, p at most MaxPartition and validKey must accept
// every agent.
func CheckMarkKeys(ctx context.Context, op string, validKey func(id string) bool, p uint32, keys []MarkKey) error {
	if err := CheckPartition(ctx, op, p); err != nil {
		return err
	}
	for _, k := range keys {
		if !validKey(k.Agent) {
			return fmt.Errorf("cannot %s: %w: mark agent %q cannot be a key", op, ErrInvalid, k.Agent)
		}
	}
	return nil
}
