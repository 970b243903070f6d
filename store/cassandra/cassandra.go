package cassandra

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/edgecount/edgecount/backoff"
	"github.com/edgecount/edgecount/store"
)

// Errors callers can match with errors.Is.
var (
	// ErrInvalid means a call broke the store's contract (an id that cannot
	// be a key, a row without an action, an update that changes the
	// incarnation…). Nothing was written.
	ErrInvalid = store.ErrInvalid
	// ErrCorrupt means a stored value cannot be read by this version of
	// edgecount (an unknown action, trending lists of unequal length).
	ErrCorrupt = errors.New("store data corrupt or from an unknown version")
	// ErrOutcomeUnknown means a reaction write reached Cassandra but whether
	// it applied could not be settled (see the package documentation). It
	// always comes wrapped together with store.ErrUnavailable.
	ErrOutcomeUnknown = errors.New("outcome of the lightweight transaction is unknown")
	// ErrIndexBehind means a reaction write applied but the by-content entry
	// that follows it could not be written: the returned applied is true,
	// and the entry stays behind until the recount repairs it. It always
	// comes wrapped together with store.ErrUnavailable.
	ErrIndexBehind = errors.New("reaction applied but its by-content entry was not written")
)

// indexTable is the bucketed by-content index.
const indexTable = IndexTable

// IndexTable is the bucketed by-content index.
const IndexTable = "user_likes_by_bucket"

// maxKeyPart bounds one id, scope, counter or window name in bytes. Cassandra
// refuses partition keys over 64 KiB; ids are at most engagement.MaxIDLen.
const maxKeyPart = 1024

// validKeyPart reports whether s can be a key column: non-empty, short, and
// valid UTF-8 (CQL text).
func validKeyPart(s string) bool {
	return len(s) > 0 && len(s) <= maxKeyPart && utf8.ValidString(s)
}

// Store is a Cassandra-backed store. It is safe for concurrent use.
type Store struct {
	session    *gocql.Session
	cons       gocql.Consistency
	serialCons gocql.Consistency
	timeout    time.Duration
	q          statements
	counters   Counters
	keyspace   string
	// clockOffset is Config.ClockOffset.
	clockOffset time.Duration
	// indexCons is the consistency of the by-content entries written
	// before a change (preIndex, markIndex) and of a count's reads of
	// them, so that a count sees every entry a change wrote before it
	// applied, from any data centre (indexConsistency).
	indexCons gocql.Consistency
	// buckets is the bucket count of the by-content index (the keyspace's
	// index_buckets).
	buckets int
	// complete reports that every writer of the keyspace writes pending
	// entries (layoutComplete), so that counts are exact; completeChecked
	// is when it was last read (UnixNano), while it is false.
	complete        atomic.Bool
	completeChecked atomic.Int64
	// lastTS is the last write timestamp handed out by writeTimestamp.
	lastTS atomic.Int64
	// paxosV2 reports that the cluster runs Paxos v2 (paxos_variant v2,
	// read at Open): a lightweight transaction it refuses as unavailable
	// then proposed nothing (see refusedBeforeRun).
	paxosV2 bool
	// beforeRevive, set only by tests, runs before each attempt of
	// InsertReaction to take a marker over (a competitor's moment).
	beforeRevive func(attempt int)
	// failFollowUp, set only by tests, fails the by-content write that
	// follows an applied change (putIndex, delIndex) without sending it,
	// as a node lost at that moment would.
	failFollowUp atomic.Bool
}

// Counters counts the rare events of a Store that an operator watches.
// The fields only grow; read them with Load.
type Counters struct {
	// Settled counts reaction writes whose outcome was open (a timeout, a
	// lost connection) and was settled by a serial read.
	Settled atomic.Int64
	// Unknown counts reaction writes that failed with ErrOutcomeUnknown.
	Unknown atomic.Int64
	// IndexBehind counts applied reaction writes whose by-content entry
	// could not be written (ErrIndexBehind).
	IndexBehind atomic.Int64
	// Deletes counts applied undos: each leaves a tombstone (the deleted
	// by-content entry) and a marker row.
	Deletes atomic.Int64
	// IndexPages and IndexRowsRead count the pages of by-content entries
	// read (CountReactions, RecountReactions) and the entries they held.
	IndexPages    atomic.Int64
	IndexRowsRead atomic.Int64
	// TombstoneWarnings counts index pages the server answered with a
	// warning (Cassandra warns when one read scans more than
	// tombstone_warn_threshold tombstones, 1,000 by default). Paging keeps
	// it at zero under ordinary undo rates; see docs/data-model.md.
	TombstoneWarnings atomic.Int64
	// Fenced counts settled writes whose row was fenced (see settle) so a
	// copy of the write still queued in the cluster can never apply.
	Fenced atomic.Int64
	// IndexRepaired counts by-content entries written again from their
	// row: by a count (pending after a follow-up write failed), or by
	// RepairIndex (missing, stale or damaged).
	IndexRepaired atomic.Int64
	// IndexRemoved counts by-content entries RepairIndex deleted: of an
	// incarnation no row holds, or in a bucket not their user's.
	IndexRemoved atomic.Int64
	// Contended counts reaction writes left open by a Paxos contention
	// timeout that could not be settled at once (store.ErrContention).
	Contended atomic.Int64
}

// Counters returns the live counters of s.
func (s *Store) Counters() *Counters { return &s.counters }

// statements are the CQL statements of a Store, qualified with its keyspace.
type statements struct {
	getReaction, getReactions                string
	insertReaction, updateReaction, delReact string
	reviveReaction                           string
	fenceBump, fenceInsert                   string
	putIndex, delIndex, preIndex, markIndex  string
	indexFirst, indexAfter, indexUser        string
	getLayout, putLayout                     string
	readStats, readStatsIn, writeStats       string
	scanStats, scanStatsItem                 string
	putTrending, getTrending, readTrending   string
	readMarks, writeMark, deleteMarks        string
	ping                                     string
}

func newStatements(ks string) statements {
	return statements{
		getReaction: `SELECT action, region, version, incarnation, updated_at, writers FROM ` + ks +
			`.user_likes WHERE user_id = ? AND content_id = ?`,
		getReactions: `SELECT content_id, action, region, version, incarnation, updated_at, writers FROM ` + ks +
			`.user_likes WHERE user_id = ? AND content_id IN ?`,
		insertReaction: `INSERT INTO ` + ks + `.user_likes (user_id, content_id, action, region, version, incarnation, updated_at, writers)` +
			` VALUES (?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS`,
		updateReaction: `UPDATE ` + ks + `.user_likes SET action = ?, region = ?, version = ?, updated_at = ?, writers = ?` +
			` WHERE user_id = ? AND content_id = ? IF version = ? AND incarnation = ?`,
		// An undo marks the row instead of deleting it (see docs/fence.md): the
		// marker's incarnation is a token of the undo's own.
		delReact: `UPDATE ` + ks + `.user_likes SET action = ?, version = ?, incarnation = ?, updated_at = ?, writers = ?` +
			` WHERE user_id = ? AND content_id = ? IF version = ? AND incarnation = ?`,
		// An insert over the marker of an undone reaction.
		reviveReaction: `UPDATE ` + ks + `.user_likes SET action = ?, region = ?, version = ?, incarnation = ?, updated_at = ?, writers = ?` +
			` WHERE user_id = ? AND content_id = ? IF action = ? AND version = ? AND incarnation = ?`,
		// Fences that make a settled "not applied" final (see settle): a
		// version bump that keeps the row's content, and a marker where no
		// row is.
		fenceBump: `UPDATE ` + ks + `.user_likes SET version = ?` +
			` WHERE user_id = ? AND content_id = ? IF version = ? AND incarnation = ?`,
		fenceInsert: `INSERT INTO ` + ks + `.user_likes (user_id, content_id, action, region, version, incarnation, updated_at)` +
			` VALUES (?, ?, ?, '', 1, ?, ?) IF NOT EXISTS`,
		// The by-content index, one partition per (item, bucket); see
		// docs/data-model.md. A scan reads a bucket in pages of LIMIT
		// entries that resume after the last user of the page before.
		putIndex: `INSERT INTO ` + ks + `.` + indexTable + ` (content_id, bucket, user_id, incarnation, action, region, version, pending)` +
			` VALUES (?, ?, ?, ?, ?, ?, ?, false) USING TIMESTAMP ?`,
		// Written before a change's transaction (see index.go, "pending
		// entries"): the entry of a new incarnation, and the mark of an
		// entry whose row is about to change.
		preIndex: `INSERT INTO ` + ks + `.` + indexTable + ` (content_id, bucket, user_id, incarnation, action, region, version, pending)` +
			` VALUES (?, ?, ?, ?, ?, ?, ?, true) USING TIMESTAMP ?`,
		markIndex: `UPDATE ` + ks + `.` + indexTable + ` USING TIMESTAMP ? SET pending = true` +
			` WHERE content_id = ? AND bucket = ? AND user_id = ? AND incarnation = ?`,
		delIndex: `DELETE FROM ` + ks + `.` + indexTable + ` USING TIMESTAMP ?` +
			` WHERE content_id = ? AND bucket = ? AND user_id = ? AND incarnation = ?`,
		indexFirst: `SELECT user_id, incarnation, action, region, pending FROM ` + ks + `.` + indexTable +
			` WHERE content_id = ? AND bucket = ? LIMIT ?`,
		indexAfter: `SELECT user_id, incarnation, action, region, pending FROM ` + ks + `.` + indexTable +
			` WHERE content_id = ? AND bucket = ? AND user_id > ? LIMIT ?`,
		indexUser: `SELECT user_id, incarnation, action, region, pending FROM ` + ks + `.` + indexTable +
			` WHERE content_id = ? AND bucket = ? AND user_id = ?`,
		getLayout: `SELECT value FROM ` + ks + `.layout WHERE name = ?`,
		putLayout: `INSERT INTO ` + ks + `.layout (name, value) VALUES (?, ?) IF NOT EXISTS`,
		// The reads of rows and marks return their write timestamps, which
		// the store's own then exceed (observeTimestamp).
		readStats: `SELECT scope, likes, dislikes, counters, updated_at, last_seq, WRITETIME(last_seq) FROM ` + ks +
			`.content_stats WHERE content_id = ?`,
		readStatsIn: `SELECT content_id, scope, likes, dislikes, counters, updated_at, last_seq, WRITETIME(last_seq) FROM ` + ks +
			`.content_stats WHERE content_id IN ?`,
		writeStats: `INSERT INTO ` + ks + `.content_stats (content_id, scope, likes, dislikes, counters, updated_at, last_seq)` +
			` VALUES (?, ?, ?, ?, ?, ?, ?)`,
		// The recount's scan (recount.go): partitions in token order, and
		// the rest of a partition split between two pages.
		scanStats: `SELECT token(content_id), content_id, scope, likes, dislikes, counters, updated_at, last_seq FROM ` + ks +
			`.content_stats WHERE token(content_id) > ? LIMIT ?`,
		scanStatsItem: `SELECT token(content_id), content_id, scope, likes, dislikes, counters, updated_at, last_seq FROM ` + ks +
			`.content_stats WHERE content_id = ? AND scope > ? LIMIT ?`,
		putTrending: `INSERT INTO ` + ks + `.trending_parts (scope, counter_name, window_name, part, as_of, item_ids, item_counts, item_errors)` +
			` VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		getTrending: `SELECT as_of, item_ids, item_counts, item_errors FROM ` + ks +
			`.trending_parts WHERE scope = ? AND counter_name = ? AND window_name = ? AND part = ?`,
		readTrending: `SELECT part, as_of, item_ids, item_counts, item_errors FROM ` + ks +
			`.trending_parts WHERE scope = ? AND counter_name = ? AND window_name = ?`,
		readMarks:   `SELECT agent, epoch, seq, flushed_at, updated_at, WRITETIME(seq) FROM ` + ks + `.rollup_marks WHERE part = ?`,
		writeMark:   `INSERT INTO ` + ks + `.rollup_marks (part, agent, epoch, seq, flushed_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
		deleteMarks: `DELETE FROM ` + ks + `.rollup_marks WHERE part = ? AND agent = ? AND epoch = ?`,
		ping:        `SELECT release_version FROM system.local`,
	}
}

// all lists the statements Open prepares.
func (q *statements) all() []string {
	return []string{
		q.getReaction, q.getReactions, q.insertReaction, q.updateReaction, q.delReact,
		q.reviveReaction, q.fenceBump, q.fenceInsert, q.putIndex, q.delIndex, q.preIndex, q.markIndex,
		q.indexFirst, q.indexAfter, q.indexUser, q.getLayout, q.putLayout, q.readStats, q.readStatsIn, q.writeStats,
		q.scanStats, q.scanStatsItem,
		q.putTrending, q.getTrending, q.readTrending,
		q.readMarks, q.writeMark, q.deleteMarks,
	}
}

// schema returns the statements that create the keyspace and its tables.
// Every one is idempotent (IF NOT EXISTS).
func schema(ks string, r Replication) []string {
	return []string{
		`CREATE KEYSPACE IF NOT EXISTS ` + ks + ` WITH replication = ` + r.cql() + ` AND durable_writes = true`,
		// One partition per user: a user's rows for a page of items are one
		// single-partition read, and lightweight transactions of different
		// users never contend.
		`CREATE TABLE IF NOT EXISTS ` + ks + `.user_likes (
			user_id text,
			content_id text,
			action text,
			region text,
			version bigint,
			incarnation bigint,
			updated_at bigint,
			writers frozen<list<bigint>>,
			PRIMARY KEY ((user_id), content_id)
		) WITH comment = 'UserLikes: written only by lightweight transactions. action none marks an undone reaction (no row). incarnation is a uint64 stored as bigint; updated_at is microseconds since the Unix epoch; writers are the uint64 tokens of the last writes, oldest first.'`,
		// Tables created before writer tokens get the column (an online
		// schema change; older rows read as having no tokens).
		`ALTER TABLE ` + ks + `.user_likes ADD IF NOT EXISTS writers frozen<list<bigint>>`,
		// The by-content index, bucketed by a hash of user_id so that no
		// partition outgrows ~100 MB at 10^8 reactions per item (see
		// docs/data-model.md). It replaces user_likes_by_content
		// (PRIMARY KEY ((content_id), user_id, incarnation)); MigrateIndex
		// copies that table's entries into it.
		`CREATE TABLE IF NOT EXISTS ` + ks + `.` + indexTable + ` (
			content_id text,
			bucket int,
			user_id text,
			incarnation bigint,
			action text,
			region text,
			version bigint,
			pending boolean,
			PRIMARY KEY ((content_id, bucket), user_id, incarnation)
		) WITH comment = 'By-content entries of user_likes, bucket = xxhash64(user_id) mod the keyspace''s index_buckets (table layout). Before each change an entry is written or marked pending (write timestamp 2 x version - 1), after it the entry is written (2 x version) or deleted (2 x (version + 1)); a pending entry is counted by its row.'`,
		// Tables created before pending entries get the column (older
		// entries read as not pending).
		`ALTER TABLE ` + ks + `.` + indexTable + ` ADD IF NOT EXISTS pending boolean`,
		// Facts fixed for the keyspace's life, written once (IF NOT
		// EXISTS): index_buckets.
		`CREATE TABLE IF NOT EXISTS ` + ks + `.layout (
			name text PRIMARY KEY,
			value int
		) WITH comment = 'Layout of the keyspace, each fact written once: index_buckets is the bucket count of ` + indexTable + ` (first Open); index_complete = 1 records that every writer writes pending entries (first Open of a new keyspace, or RepairIndex).'`,
		`CREATE TABLE IF NOT EXISTS ` + ks + `.content_stats (
			content_id text,
			scope text,
			likes bigint,
			dislikes bigint,
			counters frozen<map<text, bigint>>,
			updated_at bigint,
			last_seq bigint,
			PRIMARY KEY ((content_id), scope)
		) WITH comment = 'ContentStats: plain values, one writer per partition. last_seq is a uint64 stored as bigint; updated_at is microseconds since the Unix epoch.'`,
		// One partition per (scope, counter, window): the lists of every
		// partial-sum partition (part) are one single-partition read.
		`CREATE TABLE IF NOT EXISTS ` + ks + `.trending_parts (
			scope text,
			counter_name text,
			window_name text,
			part int,
			as_of bigint,
			item_ids frozen<list<text>>,
			item_counts frozen<list<bigint>>,
			item_errors frozen<list<bigint>>,
			PRIMARY KEY ((scope, counter_name, window_name), part)
		) WITH comment = 'Top-K lists, one row per partial-sum partition (one writer each); the three item lists are parallel. part is a uint32 stored as int; as_of is microseconds since the Unix epoch.'`,
		// One partition per partial-sum partition: the rollup that takes a
		// partition over reads every agent's mark in one single-partition
		// query.
		`CREATE TABLE IF NOT EXISTS ` + ks + `.rollup_marks (
			part int,
			agent text,
			epoch bigint,
			seq bigint,
			flushed_at bigint,
			updated_at bigint,
			PRIMARY KEY ((part), agent, epoch)
		) WITH comment = 'High-water marks of the rollup: per (partial-sum partition, agent, run epoch) the highest flush seq applied. Plain values, one writer per partition (its rollup), written after the stats rows of the message. part is a uint32 stored as int; epoch and seq are uint64 stored as bigint; flushed_at (the agent clock) and updated_at (the rollup clock) are microseconds since the Unix epoch.'`,
		trendingStateTable(ks),
	}
}

// OpenWait bounds how long Open keeps trying to create its session when
// no contact point answers (ctx may end it sooner).
const OpenWait = 30 * time.Second

// Open connects to the cluster, creates the keyspace and tables if missing
// and prepares every statement. Each try at creating the session is
// bounded by cfg.ConnectTimeout; when none of the contact points answers it
// tries again, backing off, for up to OpenWait or until ctx ends (a refused
// login is not tried again). Everything after the session uses ctx.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cannot open cassandra store: invalid config: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cannot open cassandra store: %w", err)
	}
	cons, _ := cfg.consistency()
	serial, _ := cfg.serialConsistency()

	cluster := gocql.NewCluster(cfg.Hosts...)
	cluster.Port = cfg.Port
	cluster.Consistency = cons
	cluster.SerialConsistency = serial
	cluster.Timeout = cfg.Timeout
	cluster.ConnectTimeout = cfg.ConnectTimeout
	// Only statements marked idempotent are ever retried (the driver checks);
	// lightweight transactions are not marked and are settled by a serial
	// read instead.
	cluster.RetryPolicy = retryPolicy{retries: 2}
	cluster.DefaultIdempotence = false
	if cfg.LocalDC != "" && !cfg.RemoteDCFallback {
		// Nodes of other data centres are not used at all, so LOCAL_*
		// always means this process's data centre.
		cluster.HostFilter = gocql.DataCenterHostFilter(cfg.LocalDC)
	}
	cluster.Dialer = cfg.dialer
	if cfg.Username != "" {
		cluster.Authenticator = gocql.PasswordAuthenticator{Username: cfg.Username, Password: cfg.Password}
	}
	if cfg.TLS.Enabled() {
		tc, err := cfg.TLS.config()
		if err != nil {
			return nil, fmt.Errorf("cannot open cassandra store: %w", err)
		}
		cluster.SslOpts = &gocql.SslOptions{Config: tc, EnableHostVerification: !cfg.TLS.InsecureSkipVerify}
	}

	session, err := createSession(ctx, cluster, cfg.LocalDC)
	if err != nil {
		where := hostsString(cfg)
		if cfg.LocalDC != "" && !cfg.RemoteDCFallback {
			where += " (data centre " + cfg.LocalDC + " only)"
		}
		return nil, fmt.Errorf("cannot open cassandra store at %s: %w", where, unavailable(err))
	}
	s := &Store{
		session:     session,
		cons:        cons,
		serialCons:  serial,
		indexCons:   indexConsistency(cons, serial),
		clockOffset: cfg.ClockOffset,
		timeout:     cfg.Timeout,
		q:           newStatements(cfg.Keyspace),
		keyspace:    cfg.Keyspace,
	}
	if err := s.init(ctx, cfg); err != nil {
		session.Close()
		return nil, fmt.Errorf("cannot open cassandra store at %s: %w", hostsString(cfg), err)
	}
	return s, nil
}

// createSession creates cluster's session, trying again while the error
// may pass: at start-up a node that is loaded or restarting can miss one
// handshake, and a process that gave up on it would be restarted into the
// same race. The driver tries each contact point once per call and reports
// only the last one's error, so a refused login is recognised by its text.
//
// Requests go to a replica of their partition first, then round robin over
// the nodes (of localDC first, when it is set). The driver binds a policy to
// one session, so each try gets its own.
func createSession(ctx context.Context, cluster *gocql.ClusterConfig, localDC string) (session *gocql.Session, err error) {
	err = backoff.Retry(ctx, OpenWait, 250*time.Millisecond, 4*time.Second, func() (bool, error) {
		fallback := gocql.RoundRobinHostPolicy()
		if localDC != "" {
			fallback = gocql.DCAwareRoundRobinPolicy(localDC)
		}
		cluster.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(fallback)
		var err error
		session, err = cluster.CreateSession()
		return err != nil && !loginRefused(err), err
	})
	return session, err
}

// loginRefused reports whether err says the credentials were refused
// (Cassandra's "Provided username … and/or password are incorrect"), or
// that the node asks for an authenticator the driver will not use. A node
// that cannot read its roles ("Unable to perform authentication: Cannot
// achieve consistency level QUORUM", while another DC's replica of
// system_auth is down) has not refused the login: that is tried again.
func loginRefused(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "password are incorrect") || strings.Contains(msg, "unexpected authenticator")
}

// init creates the schema and prepares the statements.
func (s *Store) init(ctx context.Context, cfg Config) error {
	for _, stmt := range schema(cfg.Keyspace, cfg.Replication) {
		if err := s.execSchema(ctx, stmt); err != nil {
			return fmt.Errorf("cannot create schema (%s): %w", firstLine(stmt), err)
		}
	}
	for _, stmt := range s.q.all() {
		if _, err := s.session.StatementMetadata(ctx, stmt, cfg.Keyspace); err != nil {
			return fmt.Errorf("cannot prepare %q: %w", stmt, unavailable(err))
		}
	}
	n, created, err := s.layout(ctx, layoutBuckets, cmp.Or(cfg.IndexBuckets, DefaultIndexBuckets))
	if err != nil {
		return fmt.Errorf("cannot read the index layout: %w", err)
	}
	if n < 1 || n > MaxIndexBuckets {
		return fmt.Errorf("%w: keyspace %s has index_buckets %d, want 1..%d", ErrCorrupt, cfg.Keyspace, n, MaxIndexBuckets)
	}
	if cfg.IndexBuckets != 0 && cfg.IndexBuckets != n {
		return fmt.Errorf("%w: index buckets %d: keyspace %s was created with %d, and a keyspace's bucket count never changes (leave it 0 to use the keyspace's)",
			ErrInvalid, cfg.IndexBuckets, cfg.Keyspace, n)
	}
	s.buckets = n
	if created {
		// A keyspace this version made: every entry was written with
		// its marks. (A racing Open of the same new keyspace writes the
		// same.)
		if _, _, err := s.layout(ctx, layoutComplete, 1); err != nil {
			return fmt.Errorf("cannot record the index as complete: %w", err)
		}
	}
	s.readComplete(ctx)
	s.paxosV2 = s.readPaxosV2(ctx)
	return nil
}

// indexConsistency returns the consistency of the pending entries and of
// the counts' reads: a quorum of all data centres when reactions are
// serial across them (the transactions need such a quorum anyway, so it
// costs no availability), so that a count in one data centre sees the
// entries a change in another wrote before it applied; else cons.
func indexConsistency(cons, serial gocql.Consistency) gocql.Consistency {
	if serial == gocql.Serial {
		return gocql.Quorum
	}
	return cons
}

// layoutComplete names the fact that the keyspace's by-content index is
// complete: every writer since it was recorded writes the pending entries
// (see index.go). A keyspace created by this version has it from its first
// Open; an older keyspace gets it from RepairIndex, run once every writer
// runs this version.
const layoutComplete = "index_complete"

// readComplete reads layoutComplete into s.complete.
func (s *Store) readComplete(ctx context.Context) {
	s.completeChecked.Store(time.Now().UnixNano())
	var v int
	if err := s.session.Query(s.q.getLayout, layoutComplete).Consistency(s.cons).Idempotent(true).ScanContext(ctx, &v); err == nil && v == 1 {
		s.complete.Store(true)
	}
}

// IndexComplete reports whether the keyspace's by-content index is
// complete (layoutComplete), so that a finished count is exact. While it
// is not, the fact is read again at most once a minute.
func (s *Store) IndexComplete(ctx context.Context) bool {
	if !s.complete.Load() && time.Since(time.Unix(0, s.completeChecked.Load())) > time.Minute {
		s.readComplete(ctx)
	}
	return s.complete.Load()
}

// readPaxosV2 reports whether the node answering runs Paxos v2: Cassandra
// 4.1 and later show paxos_variant in system_views.settings. Any other
// answer (an older node, an error) is taken as v1. The variant is a
// cluster-wide setting (Cassandra's v2 migration requires every node on
// it), so one node's answer is the cluster's.
func (s *Store) readPaxosV2(ctx context.Context) bool {
	var v string
	err := s.session.Query(`SELECT value FROM system_views.settings WHERE name = 'paxos_variant'`).
		Consistency(gocql.One).WithContext(ctx).Scan(&v)
	return err == nil && strings.HasPrefix(v, "v2")
}

// layoutBuckets names the bucket count of the by-content index in the
// layout table.
const layoutBuckets = "index_buckets"

// layout returns the keyspace's value of name, writing want first if the
// keyspace has none (the first Open of a keyspace decides; every later one
// reads the same value). created reports that the value was not there
// before this call.
func (s *Store) layout(ctx context.Context, name string, want int) (got int, created bool, err error) {
	err = s.session.Query(s.q.getLayout, name).Consistency(s.cons).Idempotent(true).ScanContext(ctx, &got)
	if err == nil {
		return got, false, nil
	}
	if !errors.Is(err, gocql.ErrNotFound) {
		return 0, false, unavailable(err)
	}
	for range schemaAttempts {
		m := make(map[string]any, 2)
		_, err = s.session.Query(s.q.putLayout, name, want).Consistency(s.cons).SerialConsistency(s.serialCons).
			MapScanCASContext(ctx, m)
		if err == nil || !unknownOutcome(err) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return 0, false, unavailable(err)
	}
	// Whichever Open won, the row now exists.
	if err := s.session.Query(s.q.getLayout, name).Consistency(s.cons).Idempotent(true).ScanContext(ctx, &got); err != nil {
		return 0, false, unavailable(err)
	}
	return got, true, nil
}

// schemaAttempts bounds the attempts of one schema statement.
const schemaAttempts = 5

// execSchema runs an idempotent schema statement (… IF NOT EXISTS, … IF
// EXISTS). A schema change on a busy node can take longer than
// Config.Timeout; the change then usually completes anyway, and running the
// statement again is harmless, so a timed-out statement is retried, within
// ctx. The driver waits for schema agreement after each change.
func (s *Store) execSchema(ctx context.Context, stmt string) error {
	var err error
	for range schemaAttempts {
		err = s.session.Query(stmt).Idempotent(true).ExecContext(ctx)
		if err == nil || !unknownOutcome(err) || ctx.Err() != nil {
			break
		}
	}
	return unavailable(err)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i])
	}
	return s
}

func hostsString(cfg Config) string {
	hs := make([]string, len(cfg.Hosts))
	for i, h := range cfg.Hosts {
		if _, _, err := net.SplitHostPort(h); err == nil {
			hs[i] = h
		} else {
			hs[i] = net.JoinHostPort(h, fmt.Sprint(cfg.Port))
		}
	}
	return strings.Join(hs, ",")
}

// Close closes the session. Calls after Close fail with store.ErrUnavailable.
func (s *Store) Close() error {
	s.session.Close()
	return nil
}

// Ping reports whether a node answers a query.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cannot ping cassandra: %w", err)
	}
	var v string
	err := s.session.Query(s.q.ping).Consistency(gocql.One).Idempotent(true).ScanContext(ctx, &v)
	if err != nil {
		return fmt.Errorf("cannot ping cassandra: %w", unavailable(err))
	}
	return nil
}

// query returns a statement at the store's consistency, bound to values.
// Reads and plain writes are marked idempotent by their callers.
func (s *Store) query(stmt string, values ...any) *gocql.Query {
	return s.session.Query(stmt, values...).Consistency(s.cons)
}

// writeTimestamp returns a write timestamp in microseconds that is above
// every one this Store handed out before, so that two writes of one row by
// this process never tie, and a retried write keeps its timestamp; and
// above every write timestamp this Store read (observeTimestamp), so that
// a rollup that took a partition over writes its rows above the last
// owner's, whatever their clocks say: totals are read before they are
// written, so a write always follows the row it replaces.
func (s *Store) writeTimestamp() int64 {
	now := s.now().UnixMicro()
	for {
		last := s.lastTS.Load()
		ts := max(now, last+1)
		if s.lastTS.CompareAndSwap(last, ts) {
			return ts
		}
	}
}

// micros encodes t as microseconds since the Unix epoch (sub-microsecond
// precision is dropped). Every time.Time between years -290307 and 294246
// fits, including the zero time.
func micros(t time.Time) int64 { return t.UnixMicro() }

// fromMicros decodes micros, in UTC.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// unavailable classifies a driver error: a request the server refused as
// malformed is a bug and stays as it is; everything else (no connection,
// timeouts, overload, closed session) is wrapped with store.ErrUnavailable.
func unavailable(err error) error {
	if err == nil {
		return nil
	}
	var syntax *gocql.RequestErrSyntax
	var invalid *gocql.RequestErrInvalid
	var cfgErr *gocql.RequestErrConfig
	if errors.As(err, &syntax) || errors.As(err, &invalid) || errors.As(err, &cfgErr) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
}

// invalidCall returns an ErrInvalid error for op.
func invalidCall(op, format string, args ...any) error {
	return fmt.Errorf("cannot %s: %w: %s", op, ErrInvalid, fmt.Sprintf(format, args...))
}

// retryPolicy retries idempotent statements on another host (or the same
// one, when it is the only one) after errors that say the request may
// succeed later, and never after errors that say it is wrong. The driver
// consults it only for statements marked idempotent.
type retryPolicy struct{ retries int }

func (p retryPolicy) Attempt(q gocql.RetryableQuery) bool {
	return q.Attempts() <= p.retries && q.Context().Err() == nil
}

func (p retryPolicy) GetRetryType(err error) gocql.RetryType {
	var (
		syntax  *gocql.RequestErrSyntax
		invalid *gocql.RequestErrInvalid
		cfgErr  *gocql.RequestErrConfig
		unauth  *gocql.RequestErrUnauthorized
	)
	switch {
	case errors.As(err, &syntax), errors.As(err, &invalid), errors.As(err, &cfgErr), errors.As(err, &unauth):
		return gocql.Rethrow
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return gocql.Rethrow
	}
	return gocql.RetryNextHost
}
