// Command topk-report measures the accuracy and speed of package topk
// against exact counts, plain Space-Saving and a Count-Min-plus-heap
// baseline at the same memory, and writes the report as Markdown:
//
//	go run -C tools ./topk-report > docs/topk-report.md
//
// Every stream comes from fixed seeds, so the accuracy figures are the same
// on every run; the speed figures are this machine's (pin the command to
// one core, `taskset -c 1 go run -C tools ./topk-report`, for steadier ones).
// The default run (10^7 arrivals over 10^6 items per stream) takes about
// two minutes and 2 GiB of memory; -events scales it down.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgecount/edgecount/topk"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "topk-report:", err)
		os.Exit(1)
	}
}

type options struct {
	events, items int
	sizes         []int // KiB
	rounds        int
	agents        int
	seed          uint64
}

func parse(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("topk-report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := options{}
	fs.IntVar(&o.events, "events", 10_000_000, "arrivals per stream")
	fs.IntVar(&o.items, "items", 1_000_000, "distinct items of the Zipf streams")
	sizes := fs.String("sizes", "16,64,256", "summary memory sizes, KiB (64 must be one of them)")
	fs.IntVar(&o.rounds, "rounds", 3, "timed passes per structure in the speed section (median)")
	fs.IntVar(&o.agents, "agents", 6, "summaries the stream is split over in the merge section")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of every stream")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var errs []error
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 4 || n > 1<<20 {
			errs = append(errs, fmt.Errorf("size %q is not a number of KiB in 4..%d", f, 1<<20))
			continue
		}
		o.sizes = append(o.sizes, n)
	}
	if !slices.Contains(o.sizes, 64) {
		errs = append(errs, errors.New("sizes must include 64 (the targets are at 64 KiB)"))
	}
	if o.events < 1000 || o.items < 1000 || o.items > 1<<24 {
		errs = append(errs, fmt.Errorf("events %d and items %d must be at least 1000 (items at most %d)", o.events, o.items, 1<<24))
	}
	if o.rounds < 1 || o.agents < 2 {
		errs = append(errs, fmt.Errorf("rounds %d must be ≥ 1 and agents %d ≥ 2", o.rounds, o.agents))
	}
	return o, errors.Join(errs...)
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	r := &reporter{o: o, log: stderr, start: time.Now()}
	var out bytes.Buffer
	if err := r.report(&out); err != nil {
		return err
	}
	_, err = stdout.Write(out.Bytes())
	return err
}

// reporter runs the measurements and writes the report.
type reporter struct {
	o     options
	log   io.Writer
	start time.Time
	md    *bytes.Buffer
}

func (r *reporter) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "[%5.1fs] %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

func (r *reporter) printf(format string, args ...any) { fmt.Fprintf(r.md, format, args...) }

// tracker is what the accuracy runs measure: topk.Summary or the baseline.
type tracker interface {
	Add(id string, weight int64)
	Top(k int) []topk.Item
}

// result is the accuracy and cost of one structure on one stream.
type result struct {
	name        string
	kib         int
	bytes       int
	tracked     int
	p10, p100   float64
	r10, r100   float64
	maxErr      int64 // largest |Count - true| over Top(100)
	maxBound    int64 // largest Error over Top(100); -1: no bound
	ns          float64
	allocsPerOp float64
}

// evaluate scores a tracker's lists against the truth: precision@k is the
// share of Top(k) whose true count reaches the k-th largest true count
// (ties at the cut count as hits); recall@k is the share of the true top k
// (ties broken by id) that the tracker tracks at all, that is, that its
// whole list, the one an agent ships, names.
func evaluate(tr tracker, t *truth, res *result) {
	all := tr.Top(-1)
	res.tracked = len(all)
	named := make(map[string]bool, len(all))
	for _, it := range all {
		named[it.ID] = true
	}
	prec := func(k int) float64 {
		cut := t.kth(k)
		hit := 0
		for _, it := range all[:min(k, len(all))] {
			if t.count(it.ID) >= cut {
				hit++
			}
		}
		return float64(hit) / float64(k)
	}
	rec := func(k int) float64 {
		hit := 0
		for _, i := range t.order[:min(k, len(t.order))] {
			if named[t.ids[i]] {
				hit++
			}
		}
		return float64(hit) / float64(min(k, len(t.order)))
	}
	res.p10, res.p100, res.r10, res.r100 = prec(10), prec(100), rec(10), rec(100)
	res.maxErr, res.maxBound = 0, -1
	for _, it := range all[:min(100, len(all))] {
		res.maxErr = max(res.maxErr, abs(it.Count-t.count(it.ID)))
		if _, ok := tr.(*topk.Summary); ok {
			res.maxBound = max(res.maxBound, it.Error)
		}
	}
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// feed adds every arrival of st to tr, timed, and counts allocations.
func feed(tr tracker, st *stream) (nsPerOp, allocsPerOp float64) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	t0 := time.Now()
	for i := range st.items {
		tr.Add(st.id(i), 1)
	}
	el := time.Since(t0)
	runtime.ReadMemStats(&m1)
	n := float64(len(st.items))
	return float64(el.Nanoseconds()) / n, float64(m1.Mallocs-m0.Mallocs) / n
}

// headerBytes is the Summary header that Bytes adds to the block.
func headerBytes() int {
	return topk.SummaryForBytes(16<<10).Bytes() - 16<<10
}

// layoutFor returns the summary with share percent of kib KiB in cells
// (in rows rows) and as many items as fit in the rest, ids of idLen bytes
// planned as ConfigForBytes does; share 0 is plain Space-Saving (one
// cell). Its Bytes is at most kib KiB plus the header.
func layoutFor(kib, share, rows, idLen int) *topk.Summary {
	budget := kib<<10 + headerBytes()
	cells := kib << 10 * share / 100 / 8
	cells -= cells % rows
	if share == 0 {
		cells, rows = 1, 1
	}
	cfg := func(c int) topk.Config {
		return topk.Config{Capacity: c, IDBytes: max(4+topk.MaxIDLen, c*(4+idLen)*5/4), Rows: rows, Cells: cells}
	}
	lo, hi := 1, kib<<10/16
	for lo < hi {
		c := (lo + hi + 1) / 2
		s, err := topk.New(cfg(c))
		if err == nil && s.Bytes() <= budget {
			lo = c
		} else {
			hi = c - 1
		}
	}
	s, err := topk.New(cfg(lo))
	if err != nil {
		panic(err)
	}
	return s
}

// layoutSweep measures other splits of the memory between cells and items
// on one stream: how the default (half, 2 rows) was chosen.
func (r *reporter) layoutSweep(st *stream, t *truth) {
	r.printf("### Layouts (%s)\n\n", st.name)
	r.printf("How `ConfigForBytes`' split was chosen: the share of the bytes given to cells and their rows, the rest to tracked items. 0%% is plain Space-Saving. The default is 50%% in %d rows.\n\n", topk.DefaultRows)
	r.printf("| memory | cells share | rows | items | cells | precision@100 | recall@100 | max err | ns/update |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, kib := range []int{16, 64} {
		for _, share := range []int{0, 25, 50, 75} {
			for _, rows := range []int{1, 2, 4} {
				if share == 0 && rows > 1 {
					continue
				}
				s := layoutFor(kib, share, rows, 16)
				res := result{kib: kib}
				res.ns, _ = feed(s, st)
				evaluate(s, t, &res)
				cfg := s.Config()
				r.printf("| %d KiB | %d%% | %d | %d | %d | %.2f | %.2f | %d | %.0f |\n", kib, share, cfg.Rows, cfg.Capacity, cfg.Cells, res.p100, res.r100, res.maxErr, res.ns)
			}
		}
	}
	r.printf("\n")
}

func (r *reporter) report(md *bytes.Buffer) error {
	var head, targets, body bytes.Buffer
	r.md = &head
	o := r.o
	r.logf("ids")
	ids := makeIDs(o.items+burstPhases*burstItems, 16, o.seed)
	index := indexOf(ids)

	r.printf("# Top-K summaries: accuracy and speed\n\n")
	r.printf("Generated by `go run -C tools ./topk-report > docs/topk-report.md` (flags: `-events %d -items %d -sizes %s -rounds %d -agents %d -seed %d`) on %s/%s, %d CPU(s) available to the process (%s), %s. ",
		o.events, o.items, joinInts(o.sizes), o.rounds, o.agents, o.seed, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpuModel(), runtime.Version())
	r.printf("Streams come from fixed seeds: the accuracy figures are the same on every run, the speed figures are this machine's at the time (it is a shared VM; the single-pass timings in the accuracy tables move by ±30%% between runs, the speed section takes the median of %d interleaved passes).\n\n", o.rounds)

	r.md = &body
	hdr := headerBytes()
	heapBytes := candidateBytes(cmHeapSize, 16)
	r.printf("## What is measured\n\n")
	r.printf("- **topk**: `topk.SummaryForBytes(n)`: Space-Saving with a conservative-update Count-Min filter of bound cells in front (%d rows), half of the memory each (see `docs/topk.md`). ", topk.DefaultRows)
	r.printf("Memory is the summary's single allocation: entries, heap, index, the ids themselves (16-byte ids here, each with a 4-byte header) and the cells; `Bytes()` adds a %d-byte header, included in the *bytes* column.\n", hdr)
	r.printf("- **space-saving**: the same code with one cell (plain Space-Saving, Metwally et al. 2005), as many items as fit in the same bytes.\n")
	r.printf("- **cm+heap**: the baseline: a plain Count-Min sketch (%d rows of 32-bit counters, every row incremented) and a min-heap of the %d items with the largest estimates, indexed by a Go map; the heap, its map and its id strings take %s bytes (measured with `runtime.MemStats`) and the counters get the rest of the same bytes. It allocates a copy of each id that enters the heap.\n", cmRows, cmHeapSize, commas(heapBytes))
	r.printf("- **precision@k**: share of the reported top k whose true count reaches the k-th largest true count (ties at the cut count as hits). **recall@k**: share of the true top k that the structure tracks at all, i.e. that the list an agent ships names. **max err**: largest |reported count − true count| over the reported top 100. **max bound**: largest guaranteed `Error` over the reported top 100 (the true count is in [Count − Error, Count]; the baseline has no bound).\n")
	r.printf("- **ns/update**: one pass over the stream, one goroutine, ids laid out one after another in memory as they arrive in requests; **allocs per 1000 updates** from `runtime.MemStats`.\n\n")

	streams := []struct {
		name string
		make func() *stream
	}{
		{"zipf-0.8", func() *stream { return zipfStream("zipf-0.8", ids[:o.items], o.events, 0.8, o.seed) }},
		{"zipf-1.0", func() *stream { return zipfStream("zipf-1.0", ids[:o.items], o.events, 1.0, o.seed) }},
		{"zipf-1.2", func() *stream { return zipfStream("zipf-1.2", ids[:o.items], o.events, 1.2, o.seed) }},
		{"bursty", func() *stream { return burstyStream(ids, o.events, o.seed) }},
	}
	single := map[string]result{} // stream → topk at 64 KiB
	speeds := map[string]*speedResult{}
	var merges []mergeResult
	var window []windowResult

	for _, sd := range streams {
		r.logf("stream %s", sd.name)
		st := sd.make()
		t := newTruth(st.ids, index, st.exact)
		distinct := len(t.order)
		r.printf("## Stream %s\n\n", st.name)
		r.printf("%s arrivals, %s distinct items; true count of rank 1: %d, rank 10: %d, rank 100: %d, rank 101: %d.",
			commas(len(st.items)), commas(distinct), t.kth(1), t.kth(10), t.kth(100), t.kth(101))
		if st.name == "bursty" {
			r.printf(" %d phases of %v over one simulated hour; in each, %.0f%% (first phase) to %.0f%% (last) of the arrivals go to %d new items (Zipf 1 among them), the rest to a Zipf 1.0 background over %s items.",
				burstPhases, burstSpan/burstPhases, burstLow*100, burstHigh*100, burstItems, commas(len(st.ids)-burstPhases*burstItems))
		}
		r.printf("\n\n| structure | memory | bytes | items tracked | precision@10 | recall@10 | precision@100 | recall@100 | max err | max bound | ns/update | allocs per 1000 updates |\n")
		r.printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, kib := range o.sizes {
			s := topk.SummaryForBytes(kib << 10)
			ss := layoutFor(kib, 0, 1, 16)
			cm := newCMHeap(kib<<10+hdr, heapBytes)
			runs := []candidateRun{
				{"topk", s, s.Bytes},
				{"space-saving", ss, ss.Bytes},
				{"cm+heap", cm, cm.Bytes},
			}
			for _, run := range runs {
				r.logf("  %s %d KiB", run.name, kib)
				res := result{name: run.name, kib: kib}
				res.ns, res.allocsPerOp = feed(run.tr, st)
				res.bytes = run.size()
				evaluate(run.tr, t, &res)
				r.row(res)
				if run.name == "topk" && kib == 64 {
					single[st.name] = res
				}
			}
		}
		r.printf("\n")

		if st.name != "bursty" {
			speeds[st.name] = r.speedRun(st)
		}
		r.logf("  merge")
		merges = append(merges, r.mergeRun(st, t, single[st.name]))
		if st.name == "bursty" {
			r.logf("  window")
			window = r.windowRun(st, index)
		}
		if st.name == "zipf-0.8" || st.name == "zipf-1.0" {
			r.logf("  layouts")
			r.layoutSweep(st, t)
		}
		if st.name == "zipf-1.0" {
			r.idLength()
		}
	}

	r.logf("stream zipf-1.0 over 10,000 items (speed)")
	small := zipfStream("zipf-1.0", ids[:min(10_000, o.items)], o.events, 1.0, o.seed)
	speeds[smallStream] = r.speedRun(small)
	small = nil

	r.mergeSection(merges)
	r.windowSection(window)
	r.logf("merge cost")
	r.speedSection(speeds)
	r.mergeCost(ids[:o.items])
	r.md = &targets
	r.targets(single, speeds, merges)
	r.md = &head
	r.printf("The run took %.0f s.\n\n", time.Since(r.start).Seconds())
	r.logf("done")
	md.Write(head.Bytes())
	md.Write(targets.Bytes())
	md.Write(body.Bytes())
	return nil
}

// candidateRun is one structure of an accuracy table.
type candidateRun struct {
	name string
	tr   tracker
	size func() int
}

// smallStream names the speed-only stream over few items, whose exact
// map fits in the CPU's caches: the map's best case.
const smallStream = "zipf-1.0 over 10,000 items"

// speedRun times r.o.rounds interleaved passes of a fresh 64 KiB summary
// and of a map that already holds every item of st (so that every update
// is an increment, not an insertion).
func (r *reporter) speedRun(st *stream) *speedResult {
	sp := &speedResult{}
	for round := range r.o.rounds {
		r.logf("  speed round %d", round+1)
		ns, _ := feed(topk.SummaryForBytes(64<<10), st)
		sp.topk = append(sp.topk, ns)
		m := make(mapCounter)
		for i, c := range st.exact {
			if c > 0 {
				m[st.ids[i]] = 0
			}
		}
		ns, _ = feed(m, st)
		sp.mapInc = append(sp.mapInc, ns)
	}
	return sp
}

// mapCounter is the exact-count peer of G8: one map increment per update.
type mapCounter map[string]int64

func (m mapCounter) Add(id string, w int64) { m[id] += w }
func (m mapCounter) Top(int) []topk.Item    { return nil }

func (r *reporter) row(res result) {
	bound := "—"
	if res.maxBound >= 0 {
		bound = strconv.FormatInt(res.maxBound, 10)
	}
	r.printf("| %s | %d KiB | %s | %d | %.2f | %.2f | %.2f | %.2f | %d | %s | %.0f | %.2f |\n",
		res.name, res.kib, commas(res.bytes), res.tracked, res.p10, res.r10, res.p100, res.r100, res.maxErr, bound, res.ns, 1000*res.allocsPerOp)
}

// idLength measures the cost of longer ids: 36-byte (UUID-shaped) ids in a
// summary planned for 16-byte ones, and in one planned for 36.
func (r *reporter) idLength() {
	o := r.o
	r.logf("  36-byte ids")
	ids := makeIDs(o.items, 36, o.seed+1)
	st := zipfStream("zipf-1.0", ids, o.events, 1.0, o.seed)
	t := newTruth(st.ids, indexOf(ids), st.exact)
	r.printf("### Longer ids (zipf-1.0, 36-byte UUID-shaped ids, 64 KiB)\n\n")
	r.printf("A summary never grows: with ids longer than planned its arena holds fewer of them, so it tracks fewer items (`Len() < Capacity()`).\n\n")
	r.printf("| structure | memory | bytes | items tracked | precision@10 | recall@10 | precision@100 | recall@100 | max err | max bound | ns/update | allocs per 1000 updates |\n")
	r.printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	planned16 := topk.SummaryForBytes(64 << 10)
	cfg, err := topk.ConfigForBytes(64<<10, 36)
	if err != nil {
		panic(err)
	}
	planned36, err := topk.New(cfg)
	if err != nil {
		panic(err)
	}
	for _, c := range []struct {
		name string
		s    *topk.Summary
	}{{"topk, planned for 16-byte ids", planned16}, {"topk, ConfigForBytes(64 KiB, 36)", planned36}} {
		res := result{name: c.name, kib: 64}
		res.ns, res.allocsPerOp = feed(c.s, st)
		res.bytes = c.s.Bytes()
		evaluate(c.s, t, &res)
		r.row(res)
	}
	r.printf("\n")
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// commas formats n with thousands separators.
func commas(n int) string {
	s := strconv.Itoa(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if name, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
		}
	}
	return "unknown CPU"
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
