package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/region"
	"github.com/edgecount/edgecount/store/embedded"
)

// result is what one size measured.
type result struct {
	Counters     int     `json:"counters"`
	LiveCounters int     `json:"live_counters"`
	AddSeconds   float64 `json:"add_seconds"`
	HeapBaseMiB  float64 `json:"heap_base_mib"`
	HeapLiveMiB  float64 `json:"heap_live_mib"` // after the adds
	RSSBaseMiB   float64 `json:"rss_base_mib"`
	RSSLiveMiB   float64 `json:"rss_live_mib"` // after the adds
	BytesPerCtr  float64 `json:"heap_bytes_per_counter"`
	RSSPerCtr    float64 `json:"rss_bytes_per_counter"`
	Warm         int     `json:"warm"`
	WarmHits     uint64  `json:"warm_hits"` // of the second pass; must be Warm
	BytesPerWarm float64 `json:"heap_bytes_per_warm_count"`
	RSSWarmMiB   float64 `json:"rss_warm_mib"` // after warming
	FlushMillis  float64 `json:"flush_ms"`
	TrendMillis  float64 `json:"flush_trending_ms"` // of flush_ms
	FlushCPUMs   float64 `json:"stop_cpu_ms"`       // the process's CPU time (all threads, GC too) during Stop, the flush and its publishing
	FlushSums    uint64  `json:"flush_sums"`
	Messages     int64   `json:"flush_messages"`
	MessageMiB   float64 `json:"flush_message_mib"`
	PeakRSSMiB   float64 `json:"peak_rss_mib"`
	GoVersion    string  `json:"go"`

	// Set by medianRuns.
	Runs                           int     `json:"-"`
	FlushMinMillis, FlushMaxMillis float64 `json:"-"`
}

// sink is the agent's publisher here: it keeps nothing and counts what it
// was given.
type sink struct{ msgs, bytes atomic.Int64 }

func (s *sink) Publish(_ context.Context, _ uint32, _ string, data []byte) error {
	s.msgs.Add(1)
	s.bytes.Add(int64(len(data)))
	return nil
}

// rowsReader answers ReadStats with the two rows a store holds for an item
// counted in one region (the region's and the global), newly allocated as
// a store's decoder makes them.
type rowsReader struct{ region string }

func (r rowsReader) ReadStats(_ context.Context, ids []string) (map[string][]engagement.Stats, error) {
	out := make(map[string][]engagement.Stats, len(ids))
	now := time.Now()
	for i, id := range ids {
		out[id] = []engagement.Stats{
			{ContentID: id, Scope: engagement.GlobalScope, Likes: int64(i), Counters: map[string]int64{"view": int64(i) * 7}, UpdatedAt: now, LastSeq: uint64(i)},
			{ContentID: id, Scope: r.region, Likes: int64(i), Counters: map[string]int64{"view": int64(i) * 7}, UpdatedAt: now, LastSeq: uint64(i)},
		}
	}
	return out, nil
}

// warmConfig is the hook for the read cache: it sizes the cache to hold
// warm items for the whole measurement. When the cache's configuration
// changes (a push-fed cache), change this function only.
func warmConfig(cfg *region.Config, warm int) {
	cfg.CacheEntries = max(2*warm, 1) // the cache's shards fill unevenly: room to spare
	cfg.CacheTTL = time.Hour
}

func memNow() (heap uint64, rss float64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, _ = procStatus("VmRSS")
	return ms.HeapInuse, rss
}

// procStatus returns a /proc/self/status field in MiB.
func procStatus(field string) (float64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}

const mib = 1 << 20

// cpuTime is the process's user and system CPU time so far: on a shared
// machine the wall time of a flush mostly measures the other tenants.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func measure(ctx context.Context, n, warm int, flushProfile string) (*result, error) {
	dir, err := os.MkdirTemp("", "edgecount-scale")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	st, err := embedded.Open(embedded.Config{Path: filepath.Join(dir, "store.db"), NoSync: true})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	cfg := region.DefaultConfig("local", "scale-agent")
	cfg.FlushInterval = time.Hour // one flush only: the final one, at Stop
	cfg.Log = region.LogConfig{}  // durability none: the counters alone
	cfg.Trending.Hot.Top = 0      // the hot rule reads the rollup's stored lists; there are none here
	warmConfig(&cfg, warm)
	pub := &sink{}
	a, err := region.New(cfg, region.Deps{
		Reactions: st, Stats: rowsReader{region: cfg.Region}, Publisher: pub,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return nil, err
	}
	a.Start()
	res := &result{Counters: n, Warm: warm, GoVersion: runtime.Version()}
	ids := make([]string, n) // the ids read back; made before the base line
	for i := range ids {
		ids[i] = "item-" + strconv.Itoa(i)
	}
	heap0, rss0 := memNow()
	res.HeapBaseMiB, res.RSSBaseMiB = float64(heap0)/mib, rss0

	start := time.Now()
	batch := make([]region.Increment, 0, 1000)
	for i := 0; i < n; i += cap(batch) {
		batch = batch[:0]
		for j := i; j < min(n, i+cap(batch)); j++ {
			// A request's id is its own string: clone, as a decoded body would be.
			batch = append(batch, region.Increment{ContentID: strings.Clone(ids[j]), Counter: "view", Delta: 1})
		}
		if err := a.Increment(ctx, batch); err != nil {
			return nil, err
		}
	}
	res.AddSeconds = time.Since(start).Seconds()
	res.LiveCounters = a.LiveCounters()
	if res.LiveCounters != n {
		return nil, fmt.Errorf("%d live counters after adding %d distinct", res.LiveCounters, n)
	}
	heap1, rss1 := memNow()
	res.HeapLiveMiB, res.RSSLiveMiB = float64(heap1)/mib, rss1
	res.BytesPerCtr = (float64(heap1) - float64(heap0)) / float64(n)
	res.RSSPerCtr = (rss1 - rss0) * mib / float64(n)

	if warm > 0 {
		// Two passes of 16-id reads: the first fills the cache, the
		// second must be served from it.
		for pass := range 2 {
			hits0 := a.Stats().CacheHits.Load()
			for i := 0; i < warm; i += 16 {
				if _, err := a.Counts(ctx, ids[i:min(warm, i+16)]); err != nil {
					return nil, err
				}
			}
			if pass == 1 {
				res.WarmHits = a.Stats().CacheHits.Load() - hits0
			}
		}
		if res.WarmHits != uint64(warm) {
			return nil, fmt.Errorf("the second pass hit the cache %d times of %d: the cache did not keep them (see warmConfig)", res.WarmHits, warm)
		}
		heap2, rss2 := memNow()
		res.BytesPerWarm = (float64(heap2) - float64(heap1)) / float64(warm)
		res.RSSWarmMiB = rss2
	}

	flushes, nanos, sums := a.Stats().Flushes.Load(), a.Stats().FlushNanos.Load(), a.Stats().SumsFlushed.Load()
	tnanos := a.Stats().TrendingNanos.Load()
	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Minute) // 10^7 sums on a loaded 2-core machine took over 5
	defer cancel()
	if flushProfile != "" {
		f, err := os.Create(flushProfile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
	}
	cpu0 := cpuTime()
	err = a.Stop(stopCtx)
	res.FlushCPUMs = float64(cpuTime()-cpu0) / 1e6
	if flushProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return nil, err
	}
	if got := a.Stats().Flushes.Load() - flushes; got != 1 {
		return nil, fmt.Errorf("%d flushes measured, want the final one alone", got)
	}
	res.FlushMillis = float64(a.Stats().FlushNanos.Load()-nanos) / 1e6
	res.TrendMillis = float64(a.Stats().TrendingNanos.Load()-tnanos) / 1e6
	res.FlushSums = a.Stats().SumsFlushed.Load() - sums
	res.Messages, res.MessageMiB = pub.msgs.Load(), float64(pub.bytes.Load())/mib
	if res.FlushSums != uint64(n) {
		return nil, fmt.Errorf("the flush carried %d sums, want %d", res.FlushSums, n)
	}
	res.PeakRSSMiB, _ = procStatus("VmHWM")
	return res, nil
}

func writeJSON(w io.Writer, r *result) error { return json.NewEncoder(w).Encode(r) }

func parseSizes(s string) ([]int, error) {
	var ns []int
	for part := range strings.SplitSeq(s, ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil || f < 1 || f > maxCounters || f != float64(int(f)) {
			return nil, fmt.Errorf("sizes: %q: want whole numbers 1..1e7, e.g. 1e4,1e5", part)
		}
		ns = append(ns, int(f))
	}
	return ns, nil
}

// measureAll runs each size in a fresh child process (this binary with
// -n), so that one size's heap does not weigh on the next's RSS.
func measureAll(ctx context.Context, ns []int, warm, runs int, jsonl string, stderr io.Writer) ([]*result, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var out []*result
	var save *os.File
	if jsonl != "" {
		if save, err = os.OpenFile(jsonl, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
			return nil, err
		}
		defer save.Close()
	}
	for _, n := range ns {
		for run := range runs {
			fmt.Fprintf(stderr, "scale: %d counters, run %d of %d...\n", n, run+1, runs)
			var stdout bytes.Buffer
			cmd := exec.CommandContext(ctx, self, "-n", strconv.Itoa(n), "-warm", strconv.Itoa(warm))
			cmd.Stdout, cmd.Stderr = &stdout, stderr
			if err := cmd.Run(); err != nil {
				return nil, fmt.Errorf("cannot measure %d counters: %w", n, err)
			}
			var r result
			sc := bufio.NewScanner(&stdout)
			if !sc.Scan() {
				return nil, errors.New("no result from the child")
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				return nil, fmt.Errorf("cannot read the result for %d: %w", n, err)
			}
			fmt.Fprintf(stderr, "scale: %s\n", sc.Bytes())
			if save != nil {
				if _, err := fmt.Fprintf(save, "%s\n", sc.Bytes()); err != nil {
					return nil, err
				}
			}
			out = append(out, &r)
		}
	}
	return out, nil
}

func readJSONL(path string) ([]*result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*result
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		var r result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("cannot read %s: %w", path, err)
		}
		out = append(out, &r)
	}
	return out, nil
}

// medianRuns keeps, per size, the run of median flush time (the lower
// middle of an even count), with the spread of flush times over the runs;
// sizes ascend.
func medianRuns(all []*result) []*result {
	by := map[int][]*result{}
	for _, r := range all {
		by[r.Counters] = append(by[r.Counters], r)
	}
	var out []*result
	for _, rs := range by {
		slices.SortFunc(rs, func(a, b *result) int { return cmp.Compare(a.FlushMillis, b.FlushMillis) })
		m := *rs[(len(rs)-1)/2]
		m.Runs, m.FlushMinMillis, m.FlushMaxMillis = len(rs), rs[0].FlushMillis, rs[len(rs)-1].FlushMillis
		out = append(out, &m)
	}
	slices.SortFunc(out, func(a, b *result) int { return cmp.Compare(a.Counters, b.Counters) })
	return out
}

func writeTable(w io.Writer, rs []*result) {
	fmt.Fprintln(w, "| distinct counters | runs | agent RSS | heap / live counter | RSS / live counter | warm counts | heap / warm count | flush (of it trending) | flush min–max | CPU of the flush | flush output | peak RSS |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		cpu := "—"
		if r.FlushCPUMs > 0 {
			cpu = ms(r.FlushCPUMs) + fmt.Sprintf(" (%.2f µs a counter)", r.FlushCPUMs*1e3/float64(r.Counters))
		}
		fmt.Fprintf(w, "| %s | %d | %.0f MiB | %.0f B | %.0f B | %s | %.0f B | %s (%s) | %s–%s | %s | %d msgs, %.1f MiB | %.0f MiB |\n",
			pow10(r.Counters), r.Runs, r.RSSLiveMiB, r.BytesPerCtr, r.RSSPerCtr, pow10(r.Warm), r.BytesPerWarm,
			ms(r.FlushMillis), ms(r.TrendMillis), ms(r.FlushMinMillis), ms(r.FlushMaxMillis), cpu, r.Messages, r.MessageMiB, r.PeakRSSMiB)
	}
}

func pow10(n int) string {
	e, m := 0, n
	for m >= 10 && m%10 == 0 {
		m /= 10
		e++
	}
	if m == 1 && e > 0 {
		return "10^" + strconv.Itoa(e)
	}
	return strconv.Itoa(n)
}

func ms(x float64) string {
	if x >= 1000 {
		return strconv.FormatFloat(x/1000, 'f', 2, 64) + " s"
	}
	return strconv.FormatFloat(x, 'f', 1, 64) + " ms"
}
