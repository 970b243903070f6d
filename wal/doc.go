// Package wal is the edge agent's local write-ahead log: a directory of
// segment files of checksummed records, appended with group commit, replayed
// at start-up and truncated as flushes are acknowledged. It imports only the
// standard library. docs/wal.md has the design argument, the crash analysis,
// the comparison with other Go logs and the measurements.
//
// # Records and indexes
//
// Every record has a 64-bit index, one more than the record before; the
// first is 1. A record stores its length, index, append time and payload
// under a CRC-32C (Castagnoli). A segment starts with a header holding the
// log's random 128-bit id and the segment's first index; the meta file holds
// the id and the truncation point, the first index not yet acknowledged.
// Indexes have no gaps: an append that fails takes none, and the index of
// an acknowledged record is never handed out again (except after a power
// cut in Interval mode, which loses records). Replay delivers strictly
// increasing indexes, each once.
//
// # Durability modes and their loss windows
//
//   - Fsync (default): Append returns after an fsync that covers its record.
//     Loss window: none; a SIGKILL or a power cut loses only records whose
//     Append had not returned.
//   - Interval: Append returns after write(2); a goroutine fsyncs every
//     SyncInterval. A SIGKILL loses nothing (the page cache survives the
//     process); a power cut or kernel crash loses up to SyncInterval (plus one
//     fsync's duration) of acknowledged records.
//   - None: no files; Append only numbers the payload. Everything not yet
//     flushed is lost with the process, as before the log existed.
//
// # What Open trusts
//
// Open checks every record. Damage is reported in Recovery.Problems and in
// Stats, never replayed, and never makes Open fail: a torn tail (the last
// segment ends inside a record, or in zeros) is cut off and its bytes kept
// in NAME.torn; after a corrupt
// record nothing more of that segment is replayed; a segment with a bad
// header or another log's id is renamed aside. Open fails only for a bad
// Config, an I/O error, a directory another Log holds (ErrLocked), or a
// missing or damaged meta file next to segments (ErrCorrupt), because then
// the truncation point is unknown. No bytes on disk make the package panic
// (fuzzed: FuzzRecordReader, FuzzOpen).
//
// # Concurrency
//
// All methods are safe for concurrent use. Appends are ordered by a mutex
// that only encodes the record into a shared buffer; the goroutine that then
// takes the commit token (a one-slot channel) yields while the group grows,
// writes everything buffered with one write(2) and one fdatasync, and wakes
// the whole group by closing its done channel. A lone appender commits its
// own record after one yield, without a timer or a hand-off to another
// goroutine; appenders arriving meanwhile share the next commit. Append
// honours ctx while it waits (the record may still become durable: outcome
// unknown). TruncateBefore, Replay and Stats do not wait for commits. Lock
// order: the commit token, then Log.mu; fmu and metaMu are never held with
// each other.
//
// AppendApply and Checkpoint are the flush barrier: AppendApply holds a
// shared gate from before its append until its apply (the in-memory add) has
// run; Checkpoint runs its fn under the exclusive gate with the next index,
// so that a drain in fn holds every record below that index and none above
// it, and TruncateBefore(next) after the flush is acknowledged leaves in the
// log exactly what no acknowledged flush carries.
//
// # Invariants
//
//   - An Append that returned nil in Fsync mode is on disk and is replayed
//     after any restart until TruncateBefore passes its index.
//   - An Append that returned ErrFull, ErrTooLarge or ErrClosed appended
//     nothing; after ErrFailed (a failed fsync) the log takes no more appends
//     until reopened.
//   - Replay(from, fn) delivers each record with index ≥ max(from, the
//     truncation point) exactly once, in index order, and nothing else.
//   - The segment files never hold more than Config.MaxBytes plus one
//     segment header.
//   - The truncation point is durable before TruncateBefore returns; segment
//     files are removed only when all their records are below it.
package wal
