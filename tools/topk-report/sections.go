package main

import (
	"math/rand/v2"
	"runtime"
	"sort"
	"time"

	"github.com/edgecount/edgecount/topk"
)

// speedResult is the timed passes of one stream: topk at 64 KiB and the
// exact map, interleaved.
type speedResult struct{ topk, mapInc []float64 }

// shipped is how many items an agent ships in the short-list variant.
const shipped = 200

// mergeResult compares one summary of a whole stream with the merge of
// summaries of its parts.
type mergeResult struct {
	stream            string
	single, full, top result
	fullSize, topSize int // mean encoded bytes per part
}

// mergeRun deals the arrivals of st at random to r.o.agents summaries of
// 64 KiB, ships each as an agent would (encoded whole, or as its top
// `shipped` items), decodes and merges them into one 64 KiB summary.
func (r *reporter) mergeRun(st *stream, t *truth, single result) mergeResult {
	rng := rand.New(rand.NewPCG(r.o.seed, 6))
	parts := make([]*topk.Summary, r.o.agents)
	for i := range parts {
		parts[i] = topk.SummaryForBytes(64 << 10)
	}
	for i := range st.items {
		parts[rng.IntN(len(parts))].Add(st.id(i), 1)
	}
	mr := mergeResult{stream: st.name, single: single}
	full, top := topk.SummaryForBytes(64<<10), topk.SummaryForBytes(64<<10)
	for _, p := range parts {
		b, _ := p.AppendBinary(nil)
		mr.fullSize += len(b)
		full.Merge(mustDecode(b))
		b = p.AppendTop(nil, shipped)
		mr.topSize += len(b)
		top.Merge(mustDecode(b))
	}
	mr.fullSize /= len(parts)
	mr.topSize /= len(parts)
	mr.full = result{name: "merged, whole summaries", kib: 64, bytes: full.Bytes()}
	evaluate(full, t, &mr.full)
	mr.top = result{name: "merged, top-200 lists", kib: 64, bytes: top.Bytes()}
	evaluate(top, t, &mr.top)
	return mr
}

func mustDecode(b []byte) *topk.Summary {
	s, err := topk.DecodeSummary(b)
	if err != nil {
		panic(err)
	}
	return s
}

func (r *reporter) mergeSection(ms []mergeResult) {
	r.printf("## Merged against one summary\n\n")
	r.printf("Each stream's arrivals are dealt at random to %d summaries of 64 KiB (agents). Each is encoded, decoded and merged into one 64 KiB summary, as the rollup does: either whole (`AppendBinary`: every item and every cell) or as its top %d items and one bound for the rest (`AppendTop`). *one summary* is the 64 KiB row of the stream's table.\n\n", r.o.agents, shipped)
	r.printf("| stream | summary | precision@10 | precision@100 | recall@100 | max err | max bound | bytes shipped per agent |\n")
	r.printf("|---|---|---|---|---|---|---|---|\n")
	for _, m := range ms {
		r.printf("| %s | one summary | %.2f | %.2f | %.2f | %d | %d | — |\n", m.stream, m.single.p10, m.single.p100, m.single.r100, m.single.maxErr, m.single.maxBound)
		r.printf("| %s | merged, whole summaries | %.2f | %.2f | %.2f | %d | %d | %s |\n", m.stream, m.full.p10, m.full.p100, m.full.r100, m.full.maxErr, m.full.maxBound, commas(m.fullSize))
		r.printf("| %s | merged, top-%d lists | %.2f | %.2f | %.2f | %d | %d | %s |\n", m.stream, shipped, m.top.p10, m.top.p100, m.top.r100, m.top.maxErr, m.top.maxBound, commas(m.topSize))
	}
	r.printf("\n")
}

// windowResult is one span of the window run.
type windowResult struct {
	span     time.Duration
	arrivals int
	merged   result
	direct   result
	mergeDur time.Duration
	addNs    float64
	bytes    int
}

// windowRun feeds the bursty stream, with its simulated times, to a
// default window of 64 KiB buckets and compares Merged(span) with the
// exact counts of the arrivals the span covers, and with one summary fed
// only those arrivals.
func (r *reporter) windowRun(st *stream, index map[string]int32) []windowResult {
	cfg, err := topk.ConfigForBytes(64<<10, 0)
	if err != nil {
		panic(err)
	}
	w, err := topk.NewWindow(topk.DefaultWindowConfig(cfg))
	if err != nil {
		panic(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t0 := time.Now()
	for i := range st.items {
		w.Add(st.at(start, i), st.id(i), 1)
	}
	addNs := float64(time.Since(t0).Nanoseconds()) / float64(len(st.items))
	end := st.at(start, len(st.items)-1)
	var out []windowResult
	for _, c := range []struct {
		span, width time.Duration
	}{{5 * time.Minute, time.Minute}, {time.Hour, time.Minute}, {24 * time.Hour, time.Hour}} {
		t1 := time.Now()
		m, err := w.Merged(end, c.span)
		if err != nil {
			panic(err)
		}
		wr := windowResult{span: c.span, mergeDur: time.Since(t1), addNs: addNs, bytes: w.Bytes()}
		from := end.Truncate(c.width).Add(c.width - c.span)
		lo := sort.Search(len(st.items), func(i int) bool { return !st.at(start, i).Before(from) })
		exact := make([]int64, len(st.ids))
		direct := topk.SummaryForBytes(64 << 10)
		for i := lo; i < len(st.items); i++ {
			exact[st.items[i]]++
			direct.Add(st.id(i), 1)
		}
		wr.arrivals = len(st.items) - lo
		t := newTruth(st.ids, index, exact)
		wr.merged = result{name: "Merged", bytes: m.Bytes()}
		evaluate(m, t, &wr.merged)
		wr.direct = result{name: "direct", bytes: direct.Bytes()}
		evaluate(direct, t, &wr.direct)
		out = append(out, wr)
	}
	return out
}

func (r *reporter) windowSection(ws []windowResult) {
	if len(ws) == 0 {
		return
	}
	r.printf("## Windows on the bursty stream\n\n")
	r.printf("The bursty stream, its arrivals spread evenly over one simulated hour, goes through `topk.Window` with `DefaultWindowConfig(ConfigForBytes(64 KiB))`: 60 buckets of one minute and 24 of one hour, %s bytes in all. `Window.Add` took %.0f ns per arrival (minute and hour rollovers included). At the last arrival, `Merged(span)` is compared with the exact counts of the arrivals its buckets cover, and with one 64 KiB summary fed only those arrivals (*direct*). The 5m view covers the last phase alone, whose leaders were nobody an hour before; 1h merges 60 minute buckets; 24h merges the hour bucket, built by merging each minute as it closed.\n\n", commas(ws[0].bytes), ws[0].addNs)
	r.printf("| span | arrivals covered | Merged precision@10 | Merged precision@100 | Merged max err | direct precision@10 | direct precision@100 | direct max err | Merged took |\n")
	r.printf("|---|---|---|---|---|---|---|---|---|\n")
	for _, w := range ws {
		r.printf("| %v | %s | %.2f | %.2f | %d | %.2f | %.2f | %d | %.1f ms |\n", w.span, commas(w.arrivals), w.merged.p10, w.merged.p100, w.merged.maxErr, w.direct.p10, w.direct.p100, w.direct.maxErr, float64(w.mergeDur.Microseconds())/1000)
	}
	r.printf("\n")
}

func (r *reporter) speedSection(speeds map[string]*speedResult) {
	r.printf("## Update speed (G8)\n\n")
	r.printf("Median of %d interleaved passes over the whole stream, one goroutine: a fresh `SummaryForBytes(64 KiB)` (admissions and evictions included) against a `map[string]int64` that already holds every item of the stream, incremented with the same ids. The map is the cost of counting exactly: over %s items it holds tens of MB and most increments miss the CPU's caches, while the summary stays in them. The last row is the map's best case, a Zipf 1.0 stream over only 10,000 items, whose map fits in cache.\n\n", r.o.rounds, commas(r.o.items))
	r.printf("| stream | topk ns/update | map ns/increment | ratio (G8, ≤ 3) | topk updates/s per core | map increments/s per core |\n")
	r.printf("|---|---|---|---|---|---|\n")
	for _, name := range []string{"zipf-0.8", "zipf-1.0", "zipf-1.2", smallStream} {
		sp := speeds[name]
		if sp == nil {
			continue
		}
		tk, mp := median(sp.topk), median(sp.mapInc)
		r.printf("| %s | %.1f | %.1f | %.2f | %s | %s |\n", name, tk, mp, tk/mp, commas(int(1e9/tk)), commas(int(1e9/mp)))
	}
	r.printf("\n")
}

// mergeCost times Merge, AppendBinary and DecodeSummary on summaries of
// each size fed half each of a Zipf 1.0 stream.
func (r *reporter) mergeCost(ids []string) {
	events := min(r.o.events, 2_000_000)
	st := zipfStream("zipf-1.0", ids, events, 1.0, r.o.seed+2)
	r.printf("## Merge and encoding cost\n\n")
	r.printf("Two summaries of each size, fed alternate arrivals of a Zipf 1.0 stream of %s arrivals over %s items; times are medians of %d rounds of repeated calls. *merge* is `Merge(b)` into a copy of `a` made outside the timing (`Reset` and `Merge(a)`), its scratch space already allocated.\n\n", commas(events), commas(len(ids)), r.o.rounds)
	r.printf("| memory | items tracked | merge | AppendBinary | encoded bytes | DecodeSummary | AppendTop(%d) bytes |\n", shipped)
	r.printf("|---|---|---|---|---|---|---|\n")
	for _, kib := range r.o.sizes {
		a, b := topk.SummaryForBytes(kib<<10), topk.SummaryForBytes(kib<<10)
		for i := range st.items {
			if i%2 == 0 {
				a.Add(st.id(i), 1)
			} else {
				b.Add(st.id(i), 1)
			}
		}
		var buf []byte
		enc, _ := a.AppendBinary(nil)
		merge := r.timeMerge(a, b)
		encode := r.timeOp(func() { buf, _ = a.AppendBinary(buf[:0]) })
		decode := r.timeOp(func() { _ = mustDecode(enc) })
		r.printf("| %d KiB | %d | %s | %s | %s | %s | %s |\n", kib, a.Len(), dur(merge), dur(encode), commas(len(enc)), dur(decode), commas(len(a.AppendTop(nil, shipped))))
	}
	r.printf("\n")
}

// timeMerge returns the median over rounds of the mean time of merging b
// into a copy of a; the copies are made outside the timed part.
func (r *reporter) timeMerge(a, b *topk.Summary) time.Duration {
	const batch = 16
	copies := make([]*topk.Summary, batch)
	for i := range copies {
		copies[i] = a.Clone()
		copies[i].Merge(b) // allocates its scratch space once
	}
	var ds []float64
	for range r.o.rounds {
		var spent time.Duration
		n := 0
		for spent < 100*time.Millisecond {
			for _, c := range copies {
				c.Reset()
				c.Merge(a) // c = a again, scratch kept
			}
			runtime.GC()
			t0 := time.Now()
			for _, c := range copies {
				c.Merge(b)
			}
			spent += time.Since(t0)
			n += batch
		}
		ds = append(ds, float64(spent)/float64(n))
	}
	return time.Duration(median(ds))
}

// timeOp returns the median over rounds of the mean time of fn, each
// round calling it for at least 100 ms.
func (r *reporter) timeOp(fn func()) time.Duration {
	var ds []float64
	for range r.o.rounds {
		n := 0
		t0 := time.Now()
		for time.Since(t0) < 100*time.Millisecond {
			fn()
			n++
		}
		ds = append(ds, float64(time.Since(t0))/float64(n))
	}
	return time.Duration(median(ds))
}

func dur(d time.Duration) string {
	if d < time.Millisecond {
		return time.Duration(d.Nanoseconds() / 100 * 100).String()
	}
	return d.Round(10 * time.Microsecond).String()
}

func (r *reporter) targets(single map[string]result, speeds map[string]*speedResult, ms []mergeResult) {
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**not met**"
	}
	r.printf("## Targets (docs/design.md)\n\n")
	r.printf("| target | stream | measured | goal | |\n|---|---|---|---|---|\n")
	goals := map[string]float64{"zipf-0.8": 0.95, "zipf-1.0": 0.99, "zipf-1.2": 0.99}
	for _, name := range []string{"zipf-0.8", "zipf-1.0", "zipf-1.2"} {
		if res, ok := single[name]; ok {
			r.printf("| G7 precision@100 at 64 KiB | %s | %.2f | ≥ %.2f | %s |\n", name, res.p100, goals[name], met(res.p100 >= goals[name]))
		}
	}
	for _, name := range []string{"zipf-0.8", "zipf-1.0", "zipf-1.2", smallStream} {
		if sp := speeds[name]; sp != nil {
			ratio := median(sp.topk) / median(sp.mapInc)
			r.printf("| G8 update ns ÷ map increment ns | %s | %.2f | ≤ 3 | %s |\n", name, ratio, met(ratio <= 3))
		}
	}
	for _, m := range ms {
		d := m.full.p100 - m.single.p100 + 0 // + 0: no negative zero
		r.printf("| G8 merged − one summary, precision@100 (%d agents, whole summaries) | %s | %.2f (%.2f vs %.2f) | ≥ −0.01 | %s |\n", r.o.agents, m.stream, d, m.full.p100, m.single.p100, met(d >= -0.01))
	}
	r.printf("\n")
}
