package config

import (
	"reflect"
	"testing"
	"time"
)

// TestDefaultValues pins every value of Default() as it was when the
// defaults were still copied as literals: taking them from the owning
// packages must not change one.
func TestDefaultValues(t *testing.T) {
	want := Config{
		Region:     "local",
		Partitions: 16,
		LogLevel:   "info",
		LogFormat:  "text",
		Agent: Agent{
			HTTP: "127.0.0.1:8080", Data: "./data",
			FlushInterval: time.Second, CacheTTL: 100 * time.Millisecond, CacheTTLPushed: 5 * time.Second,
			FreshPeerTimeout: 50 * time.Millisecond, ShutdownTimeout: 30 * time.Second,
			Durability: "fsync", DurabilityInterval: 10 * time.Millisecond, LogMaxBytes: 1 << 30,
			Idempotency: Idempotency{Window: 24 * time.Hour, MaxKeys: 1_000_000},
		},
		Rollup: Rollup{HTTP: "127.0.0.1:8081", Data: "./data-rollup", Recount: Recount{
			Interval: time.Minute, StaleAfter: 10 * time.Minute, Sample: 20, Batch: 1000,
		}},
		Cassandra: Cassandra{
			Port: 9042, Keyspace: "edgecount", Consistency: "LOCAL_QUORUM", SerialConsistency: "SERIAL",
			Timeout: 6 * time.Second, ConnectTimeout: 5 * time.Second,
		},
		Trending: Trending{
			Counters: []string{"like", "view", "share"}, SummaryBytes: 64 << 10, ListLen: 200,
			RowItems: 200, Interval: time.Second,
			HotTop: 10, HotWindow: "5m", HotShards: 0, HotCoolAfter: 5 * time.Minute,
		},
	}
	if got := Default(); !reflect.DeepEqual(got, want) {
		t.Errorf("Default() =\n%+v\nwant\n%+v", got, want)
	}
}
