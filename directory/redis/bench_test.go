package redis

import (
	"testing"

	"github.com/edgecount/edgecount/directory"
)

// BenchmarkShardsCached measures Shards on a cached entry from parallel
// goroutines, as the agent calls it when it creates a counter, next to the
// in-process directory.Local (a read-locked map) as a peer.
func BenchmarkShardsCached(b *testing.B) {
	addr := redisAddr(b)
	reg := testRegion(b, addr)
	seed(b, addr, reg, "v1", "view", 8)
	d, _ := open(b, testConfig(addr, reg))
	waitReady(b, d)
	d.Shards("v1", "view")
	waitIdle(b, d)
	local := directory.NewLocal(1)
	local.Set("v1", "view", 8)

	for _, bc := range []struct {
		name string
		dir  interface{ Shards(string, string) int }
	}{
		{"redis", d},
		{"local", local},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if bc.dir.Shards("v1", "view") != 8 {
						b.Error("wrong answer")
						return
					}
				}
			})
		})
	}
	if s := d.Stats(); s.Misses != 1 {
		b.Fatalf("misses = %d during the benchmark, want only the first", s.Misses)
	}
}
