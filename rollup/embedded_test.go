package rollup_test

import (
	"context"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/rollup"
	"github.com/edgecount/edgecount/store/embedded"
	"github.com/edgecount/edgecount/store/embedded/embeddedtest"
)

// TestRedeliveryOnEmbeddedStore applies a stream of messages, then the
// whole stream again (as JetStream would redeliver after a crash before the
// acks), against the real embedded store: the totals do not move, and the
// regional rows add up to the global row.
func TestRedeliveryOnEmbeddedStore(t *testing.T) {
	st := embeddedtest.Open(t, embedded.Config{Timeout: time.Second})
	r := rollup.New(st, nil, nil)
	ctx := context.Background()
	var msgs [][]byte
	for i := 0; i < 20; i++ {
		region := []string{"us", "eu"}[i%2]
		b := &partial.Batch{Agent: region + "-a", Region: region, Epoch: 1, Seq: uint64(i + 1), Sums: []partial.Sum{
			{ContentID: "v1", Counter: "view", Region: region, Delta: int64(i + 1)},
			{ContentID: "v1", Counter: "like", Region: region, Delta: 1},
			{ContentID: "v2", Counter: "dislike", Region: "us", Delta: 1},
		}}
		msgs = append(msgs, partial.Append(nil, b))
	}
	apply := func() {
		for i, m := range msgs {
			if err := r.Handle(ctx, uint64(100+i), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	apply()
	before, err := st.ReadStats(ctx, []string{"v1", "v2"})
	if err != nil {
		t.Fatal(err)
	}
	apply()
	after, err := st.ReadStats(ctx, []string{"v1", "v2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"v1", "v2"} {
		if len(before[id]) != len(after[id]) {
			t.Fatalf("%s rows: %d then %d", id, len(before[id]), len(after[id]))
		}
		var sum engagement.Stats
		var global engagement.Stats
		for i, row := range after[id] {
			b := before[id][i]
			if row.Likes != b.Likes || row.Dislikes != b.Dislikes || row.Counters["view"] != b.Counters["view"] {
				t.Fatalf("%s/%s changed on redelivery: %+v then %+v", id, row.Scope, b, row)
			}
			if row.Scope == engagement.GlobalScope {
				global = row
				continue
			}
			sum.Likes += row.Likes
			sum.Dislikes += row.Dislikes
			if sum.Counters == nil {
				sum.Counters = map[string]int64{}
			}
			sum.Counters["view"] += row.Counters["view"]
		}
		if sum.Likes != global.Likes || sum.Dislikes != global.Dislikes || sum.Counters["view"] != global.Counters["view"] {
			t.Fatalf("%s: regions sum to %+v, global %+v", id, sum, global)
		}
	}
	if got := after["v1"]; len(got) != 3 || got[0].Scope != "eu" || got[1].Scope != "global" || got[2].Scope != "us" {
		t.Fatalf("v1 rows = %+v", got)
	}
	var global engagement.Stats
	for _, row := range after["v1"] {
		if row.Scope == engagement.GlobalScope {
			global = row
		}
	}
	if global.Likes != 20 || global.Counters["view"] != 210 {
		t.Fatalf("v1 global = %+v, want 20 likes, 210 views", global)
	}
}
