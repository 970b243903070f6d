package engagement

import "time"

// TrendingState is what a rollup keeps of one partial-sum partition's
// trending, stored beside the partition's lists: the time and the regions
// those lists count, and the rollup's window state (Data), from which
// another rollup that takes the partition over goes on where this one
// stopped. The store keeps Data as it is given; only the rollup reads it.
type TrendingState struct {
	Partition uint32
	// AsOf is the newest flush time the partition's lists count.
	AsOf time.Time
	// Regions are the regions whose messages the lists count, each with
	// the newest flush time of its messages counted, sorted by region.
	Regions []RegionAsOf
	// Data is the rollup's encoding of its window state; nil from
	// ReadTrendingCoverage.
	Data []byte
}

// RegionAsOf is how recent one region's contribution to a trending list
// is: the newest flush time of the region's messages it counts.
type RegionAsOf struct {
	Region string
	AsOf   time.Time
}
