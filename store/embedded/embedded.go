package embedded

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/edgecount/edgecount/store"
)

// Errors callers can match with errors.Is.
var (
	// ErrLocked means the database file is held open by another Store, in
	// this process or another one. It wraps bbolt's lock timeout.
	ErrLocked = errors.New("store file is locked by another open store")
	// ErrCorrupt means a stored value or the file's layout version cannot be
	// read by this version of edgecount.
	ErrCorrupt = errors.New("store data corrupt or from an unknown version")
	// ErrInvalid means a call broke the store's contract (an id that cannot
	// be a key, a row without an action, an update that changes the
	// incarnation…). Nothing was written.
	ErrInvalid = store.ErrInvalid
)

// DefaultTimeout is the lock timeout of Open when Config.Timeout is zero.
const DefaultTimeout = time.Second

// Config configures a Store.
type Config struct {
	// Path is the database file. Its directory is created if missing.
	Path string
	// Timeout is how long Open waits for the file lock held by another
	// Store before failing with ErrLocked. Zero means DefaultTimeout.
	Timeout time.Duration
	// NoSync skips fsync on commit. A crash may then lose or corrupt
	// recent writes: for tests and benchmarks only.
	NoSync bool
}

// DefaultConfig returns the configuration of a durable store at path.
func DefaultConfig(path string) Config {
	return Config{Path: path, Timeout: DefaultTimeout}
}

// Validate reports every problem of c.
func (c Config) Validate() error {
	var errs []error
	if c.Path == "" {
		errs = append(errs, errors.New("path is empty"))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %v is negative", c.Timeout))
	}
	return errors.Join(errs...)
}

// Bucket names.
var (
	bucketLikes     = []byte("user_likes")
	bucketByContent = []byte("user_likes_by_content")
	bucketStats     = []byte("content_stats")
	bucketTrending  = []byte("trending")
	bucketMeta      = []byte("meta")
	// bucketMarks holds the rollup's high-water marks. A file written
	// before marks existed gets the bucket at Open; the layout version
	// stays 1 (older code ignores the bucket).
	bucketMarks = []byte("marks")
	// bucketUndone holds, per undone reaction (user, content), the writer
	// tokens of the deleted row, so that a writer can settle a lost answer
	// after an undo (engagement.Reaction.Writers). Created at Open like
	// bucketMarks.
	bucketUndone = []byte("user_likes_undone")
)

// schemaVersion is the key layout this package reads and writes.
const schemaVersion = 1

var keySchema = []byte("schema")

// Store is a bbolt-backed store. It is safe for concurrent use.
type Store struct {
	db *bolt.DB
	gc committer
	// commit is how writes commit: commitGroup except in tests and
	// benchmarks that compare the alternatives.
	commit   commitMode
	counters Counters
}

// Counters counts the events of a Store that an operator watches. The
// fields only grow; read them with Load.
type Counters struct {
	// Deletes counts applied undos (DeleteReaction that removed a row).
	Deletes atomic.Int64
	// Writes counts write calls (each a WriteStats, WriteStatsMark,
	// PutTrending, reaction change...); Commits the bbolt write
	// transactions (each one fsync, two in bbolt's commit) that carried
	// them. Writes ÷ Commits is how many writes the group commit shares a
	// transaction among.
	Writes, Commits atomic.Int64
}

// Counters returns the live counters of s.
func (s *Store) Counters() *Counters { return &s.counters }

// commitMode selects how writes commit.
type commitMode uint8

const (
	commitGroup commitMode = iota // committer: timer-less group commit
	commitSolo                    // DB.Update: one transaction and fsync per write
	commitBatch                   // DB.Batch: bbolt's timer-based group commit
)

// OpenDir opens (creating it if needed) the embedded store of a process's
// data directory dir: the file dir/edgecount.db, waiting up to 5 s for a
// lock another store holds.
func OpenDir(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("cannot create data directory: %w", err)
	}
	return Open(Config{Path: filepath.Join(dir, "edgecount.db"), Timeout: 5 * time.Second})
}

// Open opens or creates the database at cfg.Path and its buckets.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cannot open store: invalid config: %w", err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o750); err != nil {
		return nil, fmt.Errorf("cannot open store %s: %w", cfg.Path, err)
	}
	db, err := bolt.Open(cfg.Path, 0o600, &bolt.Options{
		Timeout:      cfg.Timeout,
		NoSync:       cfg.NoSync,
		FreelistType: bolt.FreelistMapType,
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("cannot open store %s: %w (waited %v): %w", cfg.Path, ErrLocked, cfg.Timeout, err)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot open store %s: %w", cfg.Path, err)
	}
	if err := db.Update(initBuckets); err != nil {
		// The init error is the one to report; a failed close adds nothing.
		_ = db.Close()
		return nil, fmt.Errorf("cannot open store %s: %w", cfg.Path, err)
	}
	st := &Store{db: db}
	st.gc = committer{db: db, commits: &st.counters.Commits}
	return st, nil
}

// initBuckets creates the buckets if missing and checks the layout version.
func initBuckets(tx *bolt.Tx) error {
	for _, name := range [][]byte{bucketLikes, bucketByContent, bucketStats, bucketTrending, bucketMeta, bucketMarks, bucketUndone} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("cannot create bucket %s: %w", name, err)
		}
	}
	meta := tx.Bucket(bucketMeta)
	v := meta.Get(keySchema)
	if v == nil {
		return meta.Put(keySchema, binary.AppendUvarint(nil, schemaVersion))
	}
	got, n := binary.Uvarint(v)
	if n <= 0 || got != schemaVersion {
		return fmt.Errorf("%w: layout version %x, want %d", ErrCorrupt, v, schemaVersion)
	}
	return nil
}

// Close closes the database, waiting for running transactions.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("cannot close store %s: %w", s.db.Path(), err)
	}
	return nil
}

// Ping reports whether the store can serve a read.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cannot ping store: %w", err)
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketLikes) == nil {
			return fmt.Errorf("%w: bucket %s missing", ErrCorrupt, bucketLikes)
		}
		return nil
	})
	return wrap("ping store", err)
}

// write runs fn in a write transaction, usually shared with concurrent
// writers. fn may run more than once and must set its results afresh on every
// run.
func (s *Store) write(fn func(*bolt.Tx) error) error {
	s.counters.Writes.Add(1)
	switch s.commit {
	case commitSolo:
		s.counters.Commits.Add(1)
		return s.db.Update(fn)
	case commitBatch: // benchmarks only; bbolt's batches are not counted in Commits
		return s.db.Batch(fn)
	}
	return s.gc.write(fn)
}

// wrap adds the operation to err. Contract and decode errors stay as they
// are; everything else comes from bbolt (local I/O or a closed database) and
// is marked store.ErrUnavailable.
func wrap(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrCorrupt), errors.Is(err, ErrInvalid):
		return fmt.Errorf("cannot %s: %w", op, err)
	default:
		return fmt.Errorf("cannot %s: %w: %w", op, store.ErrUnavailable, err)
	}
}

// invalid returns an ErrInvalid error for op.
func invalid(op, format string, args ...any) error {
	return fmt.Errorf("cannot %s: %w: %s", op, ErrInvalid, fmt.Sprintf(format, args...))
}
