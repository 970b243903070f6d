package cassandra

import (
	"context"
	"fmt"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// TableHealth is what a node reports of one of the keyspace's tables
// (Cassandra's system_views.max_partition_size and tombstones_per_read):
// the bounds docs/data-model.md argues, as measured.
type TableHealth struct {
	// MaxPartitionMiB is the largest partition in the node's sstables, in
	// MiB (the node rounds up).
	MaxPartitionMiB int64
	// TombstonesPerReadMax and TombstonesPerReadP99 are the tombstones one
	// read of the table scanned on the node, over its recent reads.
	TombstonesPerReadMax, TombstonesPerReadP99 float64
}

// Health returns the TableHealth of the keyspace's tables, by table name,
// as the node that answers reports them: each node reports only the data
// it holds, so on a cluster of several nodes this is one node's view.
func (s *Store) Health(ctx context.Context) (map[string]TableHealth, error) {
	out := map[string]TableHealth{}
	for _, q := range []struct {
		stmt string
		set  func(h *TableHealth, m map[string]any)
	}{
		{`SELECT table_name, mebibytes FROM system_views.max_partition_size WHERE keyspace_name = ? ALLOW FILTERING`,
			func(h *TableHealth, m map[string]any) { h.MaxPartitionMiB = int64(number(m["mebibytes"])) }},
		{`SELECT table_name, max, p99th FROM system_views.tombstones_per_read WHERE keyspace_name = ? ALLOW FILTERING`,
			func(h *TableHealth, m map[string]any) {
				h.TombstonesPerReadMax, h.TombstonesPerReadP99 = number(m["max"]), number(m["p99th"])
			}},
	} {
		iter := s.session.Query(q.stmt, s.keyspace).Consistency(gocql.One).Idempotent(true).IterContext(ctx)
		for {
			m := map[string]any{}
			if !iter.MapScan(m) {
				break
			}
			name, _ := m["table_name"].(string)
			h := out[name]
			q.set(&h, m)
			out[name] = h
		}
		if err := iter.Close(); err != nil {
			return nil, fmt.Errorf("cannot read table health: %w", unavailable(err))
		}
	}
	return out, nil
}

// number converts a numeric column of a virtual table.
func number(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case int32:
		return float64(x)
	case int:
		return float64(x)
	case float64:
		return x
	case float32:
		return float64(x)
	}
	return 0
}

// HealthCache serves Health to metric scrapes: at most one read of the
// node's views per MaxAge, each bounded by a short timeout; a failed read
// keeps the last values.
type HealthCache struct {
	Store  *Store
	MaxAge time.Duration

	c scraped[map[string]TableHealth]
}

// Table returns the latest TableHealth of table.
func (c *HealthCache) Table(table string) TableHealth {
	return c.c.get(c.MaxAge, c.Store.Health)[table]
}

// scraped holds the last value of a read of the node that metric scrapes
// ask for: at most one read per maxAge, each bounded by a short timeout; a
// failed read keeps the last value.
type scraped[T any] struct {
	mu   sync.Mutex
	at   time.Time
	last T
}

func (c *scraped[T]) get(maxAge time.Duration, read func(context.Context) (T, error)) T {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) >= maxAge {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		v, err := read(ctx)
		cancel()
		c.at = time.Now()
		if err == nil {
			c.last = v
		}
	}
	return c.last
}
