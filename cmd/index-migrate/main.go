// Command index-migrate copies the by-content index of a Cassandra keyspace
// made before the index was bucketed (user_likes_by_content, one partition
// per item) into the bucketed table (user_likes_by_bucket) that this
// version reads, through cassandra.Store.MigrateIndex:
//
//	index-migrate -hosts 10.0.0.1,10.0.0.2 -keyspace edgecount
//
// Run it once every agent and rollup runs this version. It is safe while
// they serve traffic and safe to run again (see docs/data-model.md);
// afterwards drop the old table with
// DROP TABLE <keyspace>.user_likes_by_content.
//
// With -repair it runs cassandra.Store.RepairIndex instead: it brings the
// bucketed index in line with user_likes (missing, stale, leftover and
// damaged entries) and records it complete, so that the recount lowers
// totals as well as raises them on a keyspace made by an older version:
//
//	index-migrate -hosts 10.0.0.1 -keyspace edgecount -repair
//
// Run it once every agent and rollup runs this version (after the copy, if
// the keyspace still has the old table), and after any damage to the
// index; see docs/recount.md.
//
// index-migrate --version prints the build line and exits.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/edgecount/edgecount/cmd/internal/cli"
	"github.com/edgecount/edgecount/store/cassandra"
)

func main() { cli.Main("index-migrate", run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := cassandra.DefaultConfig()
	fs := flag.NewFlagSet("index-migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	hosts := fs.String("hosts", strings.Join(cfg.Hosts, ","), "comma-separated Cassandra contact `points` (host or host:port)")
	fs.IntVar(&cfg.Port, "port", cfg.Port, "CQL native `port` of hosts that name none")
	fs.StringVar(&cfg.Keyspace, "keyspace", cfg.Keyspace, "edgecount's `keyspace`")
	fs.StringVar(&cfg.LocalDC, "local-dc", "", "data centre to send requests to first")
	fs.StringVar(&cfg.Consistency, "consistency", cfg.Consistency, "consistency of the reads and writes")
	repair := fs.Bool("repair", false, "repair the bucketed index from user_likes and record it complete, instead of copying the old table")
	version := cli.DefineVersion(fs, "index-migrate", stdout)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := version(); err != nil {
		return err // --version: printed, nothing opened
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	cfg.Hosts = strings.Split(*hosts, ",")
	st, err := cassandra.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	if *repair {
		return repairIndex(ctx, st, cfg.Keyspace, stdout)
	}
	start, last := time.Now(), time.Now()
	rep, err := st.MigrateIndex(ctx, func(r cassandra.MigrateReport) {
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			fmt.Fprintf(stdout, "copied %d entries (%d pages)\n", r.Entries, r.Pages)
		}
	})
	if err != nil {
		return fmt.Errorf("%w (running it again is safe)", err)
	}
	if !rep.Found {
		fmt.Fprintf(stdout, "keyspace %s has no %s table: nothing to migrate\n", cfg.Keyspace, cassandra.LegacyIndexTable)
		return nil
	}
	fmt.Fprintf(stdout, "copied %d entries of %s.%s in %v; drop the old table with: DROP TABLE %s.%s\n",
		rep.Entries, cfg.Keyspace, cassandra.LegacyIndexTable, time.Since(start).Round(time.Millisecond), cfg.Keyspace, cassandra.LegacyIndexTable)
	return nil
}

// repairIndex runs the index repair, reporting progress every 5 s.
func repairIndex(ctx context.Context, st *cassandra.Store, keyspace string, stdout io.Writer) error {
	start, last := time.Now(), time.Now()
	rep, err := st.RepairIndex(ctx, func(r cassandra.RepairReport) {
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			fmt.Fprintf(stdout, "read %d rows and %d entries; wrote %d, removed %d\n", r.Rows, r.Entries, r.Written, r.Removed)
		}
	})
	if err != nil {
		return fmt.Errorf("%w (running it again is safe)", err)
	}
	fmt.Fprintf(stdout, "repaired the index of %s in %v: read %d rows and %d entries, wrote %d entries, removed %d; the index is complete\n",
		keyspace, time.Since(start).Round(time.Millisecond), rep.Rows, rep.Entries, rep.Written, rep.Removed)
	return nil
}
