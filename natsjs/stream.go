package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// MaxPartitions bounds StreamConfig.Partitions: the stream lists one
// subject per partition.
const MaxPartitions = 4096

// ErrPartitionInUse is returned by EnsureStream when shrinking the partition
// count would drop a partition subject that still holds messages.
var ErrPartitionInUse = errors.New("partition still holds messages")

// StreamConfig describes the stream that carries partial sums.
type StreamConfig struct {
	// Name of the stream (default EDGECOUNT_SUMS).
	Name string
	// SubjectPrefix: partition p is published to <SubjectPrefix>.<p>
	// (default edgecount.sums).
	SubjectPrefix string
	// Partitions is the number of partitions, 1..MaxPartitions (default 16).
	// Agents and rollups must agree on it.
	Partitions int
	// Replicas is the number of copies in a cluster, 1..5 (default 1).
	Replicas int
	// MaxAge drops messages older than this even if not consumed; 0 keeps
	// them forever (default 7 days).
	MaxAge time.Duration
	// DuplicateWindow is how long the broker remembers a message id to
	// de-duplicate retried publishes (default 2 minutes). It must cover the
	// longest time an agent keeps retrying one message.
	DuplicateWindow time.Duration
}

// DefaultStreamConfig returns the default stream configuration.
func DefaultStreamConfig() StreamConfig {
	return StreamConfig{
		Name:            "EDGECOUNT_SUMS",
		SubjectPrefix:   "edgecount.sums",
		Partitions:      16,
		Replicas:        1,
		MaxAge:          7 * 24 * time.Hour,
		DuplicateWindow: 2 * time.Minute,
	}
}

// Validate reports every problem with c.
func (c StreamConfig) Validate() error {
	var errs []error
	if !validName(c.Name) {
		errs = append(errs, fmt.Errorf("stream name %q is not a valid name", c.Name))
	}
	if !validSubjectPrefix(c.SubjectPrefix) {
		errs = append(errs, fmt.Errorf("subject prefix %q is not a literal subject", c.SubjectPrefix))
	}
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		errs = append(errs, fmt.Errorf("partitions %d is out of range 1..%d", c.Partitions, MaxPartitions))
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("replicas %d is out of range 1..5", c.Replicas))
	}
	if c.MaxAge < 0 {
		errs = append(errs, fmt.Errorf("max age %s is negative", c.MaxAge))
	}
	if c.DuplicateWindow <= 0 {
		errs = append(errs, fmt.Errorf("duplicate window %s is not positive", c.DuplicateWindow))
	} else if c.MaxAge > 0 && c.DuplicateWindow > c.MaxAge {
		errs = append(errs, fmt.Errorf("duplicate window %s is longer than max age %s", c.DuplicateWindow, c.MaxAge))
	}
	return errors.Join(errs...)
}

// Subject returns the subject of a partition.
func (c StreamConfig) Subject(partition uint32) string {
	return c.SubjectPrefix + "." + strconv.FormatUint(uint64(partition), 10)
}

func (c StreamConfig) subjects() []string {
	s := make([]string, c.Partitions)
	for p := range s {
		s[p] = c.Subject(uint32(p))
	}
	return s
}

func (c StreamConfig) jetstream() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        c.Name,
		Description: "edgecount partial sums, one subject per partition",
		Subjects:    c.subjects(),
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
		MaxAge:      c.MaxAge,
		Duplicates:  c.DuplicateWindow,
		Discard:     jetstream.DiscardOld,
		MaxMsgs:     -1,
		MaxBytes:    -1,
	}
}

// EnsureStream creates the stream, or updates it to cfg. It is idempotent.
// Growing the partition count adds subjects; shrinking it fails with
// ErrPartitionInUse while a dropped partition still holds messages.
// Retention and storage cannot be changed on an existing stream.
//
// A stream it creates starts at a sequence above any a stream of that name
// can have used before (see firstSeq): rows in the store remember the last
// stream sequence applied to them and skip anything at or below it, so a
// stream created again after a broker lost its state must not count from 1.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) error {
	_, err := ensureStream(ctx, js, cfg, 0)
	return err
}

// ensureStream is EnsureStream; a stream it creates starts above seen (the
// highest sequence the caller has seen). It reports whether it created the
// stream.
func ensureStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig, seen uint64) (created bool, _ error) {
	if err := cfg.Validate(); err != nil {
		return false, fmt.Errorf("cannot ensure stream: %w", err)
	}
	want := cfg.jetstream()
	st, err := js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		create := want
		create.FirstSeq = firstSeq(time.Now(), seen)
		_, err = js.CreateStream(ctx, create)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return false, fmt.Errorf("cannot create stream %s: %w", cfg.Name, err)
		}
		// Another process created it meanwhile (with its own first
		// sequence): update that one.
		st, err = js.Stream(ctx, cfg.Name)
	}
	if err != nil {
		return false, fmt.Errorf("cannot look up stream %s: %w", cfg.Name, err)
	}
	if err := checkDroppedSubjects(ctx, st, want.Subjects); err != nil {
		return false, fmt.Errorf("cannot update stream %s: %w", cfg.Name, err)
	}
	want.FirstSeq = st.CachedInfo().Config.FirstSeq // set at creation, never changed
	if _, err := js.UpdateStream(ctx, want); err != nil {
		return false, fmt.Errorf("cannot update stream %s: %w", cfg.Name, err)
	}
	return false, nil
}

// recreateStream creates the stream again if the broker does not have it
// (any more), starting above seen; a stream that exists is left alone. It
// reports whether it created the stream.
func recreateStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig, seen uint64) (created bool, _ error) {
	_, err := js.Stream(ctx, cfg.Name)
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return ensureStream(ctx, js, cfg, seen)
	default:
		return false, fmt.Errorf("cannot look up stream %s: %w", cfg.Name, err)
	}
}

// firstSeq is the first sequence of a stream created at now by a process
// that has seen sequences up to seen: the larger of seen+1 and now in
// microseconds since 1970. A stream created again after a broker lost it
// (and with it the last sequence) thus starts above every sequence the
// lost one used, as long as that one took fewer than a million messages a
// second since it was created (partial-sum streams take hundreds) and the
// creators' clocks agree to within the time between the two creations.
// Sequences stay below 2^53 (until the year 2255), so they survive a JSON
// number anywhere.
func firstSeq(now time.Time, seen uint64) uint64 {
	return max(uint64(now.UnixMicro()), seen+1)
}

// streamGone reports whether err says that a stream the caller relies on
// does not exist (any more): the broker lost it, or it was deleted. A
// publish then finds nothing that stores its subject, a lookup or a
// consumer creation names a missing stream.
func streamGone(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrStreamNotFound)
}

// checkDroppedSubjects fails if a subject the stream has now but keeps not
// in subjects still holds messages: they would stay in the stream unread.
func checkDroppedSubjects(ctx context.Context, st jetstream.Stream, subjects []string) error {
	keep := make(map[string]bool, len(subjects))
	for _, s := range subjects {
		keep[s] = true
	}
	var dropped []string
	for _, s := range st.CachedInfo().Config.Subjects {
		if !keep[s] {
			dropped = append(dropped, s)
		}
	}
	for _, s := range dropped {
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(s))
		if err != nil {
			return fmt.Errorf("cannot count messages on %s: %w", s, err)
		}
		if n := info.State.Subjects[s]; n > 0 {
			return fmt.Errorf("%w: %s has %d messages", ErrPartitionInUse, s, n)
		}
	}
	return nil
}

// validName reports whether s can name a stream or consumer.
func validName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(".*>/\\", c) >= 0 {
			return false
		}
	}
	return true
}

// validSubjectPrefix reports whether s is a literal subject: dot-separated
// non-empty tokens of printable ASCII without wildcards.
func validSubjectPrefix(s string) bool {
	if s == "" {
		return false
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || tok == "*" || tok == ">" {
			return false
		}
		for i := 0; i < len(tok); i++ {
			if c := tok[i]; c <= ' ' || c >= 0x7f {
				return false
			}
		}
	}
	return true
}
