package cassandra

import (
	"context"
	"fmt"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"golang.org/x/sync/errgroup"
)

// LegacyIndexTable is the by-content index of keyspaces made before the
// index was bucketed: PRIMARY KEY ((content_id), user_id, incarnation).
const LegacyIndexTable = "user_likes_by_content"

// MigrateReport says what MigrateIndex did.
type MigrateReport struct {
	// Entries is the number of legacy entries copied.
	Entries int64
	// Pages is the number of pages of the legacy table read.
	Pages int64
	// Found reports whether the keyspace has a legacy table at all.
	Found bool
}

// MigrateIndex copies every entry of the legacy by-content table into the
// bucketed one, each with the write timestamp it has (the row version, as
// putIndex wrote it), and leaves the legacy table as it is (drop it with
// DROP TABLE once the copy is done). It is idempotent and can run while
// the store serves writes: a newer write or undo of the same entry in the
// bucketed table has a higher timestamp and wins over the copy. Run it
// after every writer runs this version (older ones write only the legacy
// table); until it is done, counts on Cassandra may be short, which the
// recount job never lowers totals to. progress, when set, is called after
// every page with the entries copied so far.
func (s *Store) MigrateIndex(ctx context.Context, progress func(MigrateReport)) (MigrateReport, error) {
	var rep MigrateReport
	ks := s.keyspace
	var n int
	err := s.session.Query(`SELECT count(*) FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?`,
		ks, LegacyIndexTable).Consistency(gocql.One).Idempotent(true).ScanContext(ctx, &n)
	if err != nil {
		return rep, fmt.Errorf("cannot migrate the index: %w", unavailable(err))
	}
	if n == 0 {
		return rep, nil
	}
	rep.Found = true
	iter := s.query(`SELECT content_id, user_id, incarnation, action, region, version, WRITETIME(action) FROM ` +
		ks + `.` + LegacyIndexTable).PageSize(indexPage).Idempotent(true).IterContext(ctx)
	type entry struct {
		content, user, action, region string
		incarnation, version, ts      int64
	}
	var (
		page []entry
		e    entry
	)
	flush := func() error {
		// One unlogged batch per (item, bucket) partition of the page.
		groups := map[[2]any][]entry{}
		for _, e := range page {
			k := [2]any{e.content, bucketOf(e.user, s.buckets)}
			groups[k] = append(groups[k], e)
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(fanOut)
		for k, es := range groups {
			g.Go(func() error {
				b := s.session.Batch(gocql.UnloggedBatch).Consistency(s.cons)
				for _, e := range es {
					b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: s.q.putIndex, Idempotent: true,
						Args: []any{e.content, k[1], e.user, e.incarnation, e.action, e.region, e.version, e.ts}})
				}
				return unavailable(b.ExecContext(gctx))
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		rep.Entries += int64(len(page))
		rep.Pages++
		page = page[:0]
		if progress != nil {
			progress(rep)
		}
		return nil
	}
	for iter.Scan(&e.content, &e.user, &e.incarnation, &e.action, &e.region, &e.version, &e.ts) {
		page = append(page, e)
		if len(page) == indexPage {
			if err := flush(); err != nil {
				_ = iter.Close() // the write error is the one to report
				return rep, fmt.Errorf("cannot migrate the index after %d entries: %w", rep.Entries, err)
			}
		}
	}
	if err := iter.Close(); err != nil {
		return rep, fmt.Errorf("cannot migrate the index after %d entries: %w", rep.Entries, unavailable(err))
	}
	if err := flush(); err != nil {
		return rep, fmt.Errorf("cannot migrate the index after %d entries: %w", rep.Entries, err)
	}
	return rep, nil
}

// legacySchema is the legacy table's definition, for tests and
// measurements that build a keyspace as an older version left it.
func legacySchema(ks string) string {
	return `CREATE TABLE IF NOT EXISTS ` + ks + `.` + LegacyIndexTable + ` (
			content_id text,
			user_id text,
			incarnation bigint,
			action text,
			region text,
			version bigint,
			PRIMARY KEY ((content_id), user_id, incarnation)
		)`
}

// DropKeyspace drops cfg.Keyspace and everything in it, if it exists (for
// tests and measurements that make keyspaces of their own).
func DropKeyspace(ctx context.Context, cfg Config) error {
	cluster := gocql.NewCluster(cfg.Hosts...)
	cluster.Port, cluster.Timeout, cluster.ConnectTimeout = cfg.Port, cfg.Timeout, cfg.ConnectTimeout
	session, err := cluster.CreateSession()
	if err != nil {
		return fmt.Errorf("cannot drop keyspace %s: %w", cfg.Keyspace, unavailable(err))
	}
	defer session.Close()
	if !keyspaceRE.MatchString(cfg.Keyspace) {
		return fmt.Errorf("cannot drop keyspace %q: %w: not a keyspace name", cfg.Keyspace, ErrInvalid)
	}
	s := &Store{session: session}
	if err := s.execSchema(ctx, "DROP KEYSPACE IF EXISTS "+cfg.Keyspace); err != nil {
		return fmt.Errorf("cannot drop keyspace %s: %w", cfg.Keyspace, err)
	}
	return nil
}
