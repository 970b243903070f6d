package rollup

// TrendingPasses returns how many passes over the partitions RunTrending
// has finished, writes included.
func TrendingPasses(r *Rollup) uint64 { return r.trend.passes.Load() }
