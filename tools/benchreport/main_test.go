package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.md from the renderer")

// TestRenderGolden renders each testdata/*.json and compares it with the
// Markdown beside it. busy.json was reconstructed from BENCHMARKS.md of the
// 2026-12-06 15:04 run (three runs: each figure's min, median and max, one
// g5 value set just under the 1.20 it shows); its render is that file, but
// for the paths of the tools that moved to tools/ since.
// quick.json is one -quick run without protobuf rows or G13, with a wrk
// load that saw errors (null figures), on a quiet machine.
func TestRenderGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no testdata/*.json (%v)", err)
	}
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			res, err := readResults(in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := render(res)
			if err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(in, ".json") + ".md"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("render(%s) differs from %s (go test -update rewrites it):\n%s", in, golden, firstDiff(got, want))
			}
		})
	}
}

// firstDiff is the first line where got and want differ.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n got: %s\nwant: %s", i+1, gl, wl)
		}
	}
	return "(same lines)"
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func ptr(v float64) *float64 { return &v }

// TestCollect: the meta lines fill Results, each kv file becomes a run in
// argument order, and "nan" or an empty value is null.
func TestCollect(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	meta := write("meta", "started=2026-12-06T15:04:35Z\ncommit=48ed7a7 with local changes\nquick=1\nduration=2s\nout=x.md\n"+
		"sut_core=1\ngen_core=0\nconns=32\nload_before=0.5 0.4 0.3\nload_after=1.0 0.9 0.8\n"+
		"cores=2\ncpu=Some CPU @ 2.0GHz\nmemory_kib=25165824\nkernel=6.1\ngo=go1.26.8 linux/amd64\nredis=Redis server v=7.0.15\n")
	run1 := write("1.kv", "redis_incr1=126582.28\ng1=nan\n\nec_get16_wrk_ups=1.1808e+06\n")
	run2 := write("2.kv", "redis_incr1=115000\ng1=0.9\nec_get1_wrk_rps=\n")
	out := filepath.Join(dir, "results.json")
	if err := run([]string{"collect", "-meta", meta, "-o", out, run1, run2}, nil, nil); err != nil {
		t.Fatal(err)
	}
	got, err := readResults(out)
	if err != nil {
		t.Fatal(err)
	}
	want := &Results{
		Started: "2026-12-06T15:04:35Z", Commit: "48ed7a7 with local changes", Quick: true, Duration: "2s", Out: "x.md",
		SUTCore: "1", GenCore: "0", Conns: 32, LoadBefore: "0.5 0.4 0.3", LoadAfter: "1.0 0.9 0.8",
		Machine: Machine{Cores: 2, CPU: "Some CPU @ 2.0GHz", MemoryKiB: 25165824, Kernel: "6.1", Go: "go1.26.8 linux/amd64", Redis: "Redis server v=7.0.15"},
		Runs: []Run{
			{"redis_incr1": ptr(126582.28), "g1": nil, "ec_get16_wrk_ups": ptr(1180800)},
			{"redis_incr1": ptr(115000), "g1": ptr(0.9), "ec_get1_wrk_rps": nil},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("collect = %s\nwant %s", jsonText(got), jsonText(want))
	}
}

// TestCollectErrors: input collect cannot take whole is an error, not a
// figure silently dropped.
func TestCollectErrors(t *testing.T) {
	for _, tc := range []struct {
		name, meta, kv string
	}{
		{"kv line without =", "started=x\n", "g1 0.9\n"},
		{"kv key twice", "started=x\n", "g1=0.9\ng1=1.0\n"},
		{"kv value not a number", "started=x\n", "g1=fast\n"},
		{"meta key unknown", "started=x\nrunz=3\n", "g1=0.9\n"},
		{"meta conns not a number", "conns=many\n", "g1=0.9\n"},
		{"meta cores not a number", "cores=2.5\n", "g1=0.9\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			meta, kv := filepath.Join(dir, "meta"), filepath.Join(dir, "1.kv")
			os.WriteFile(meta, []byte(tc.meta), 0o644)
			os.WriteFile(kv, []byte(tc.kv), 0o644)
			var out bytes.Buffer
			if err := run([]string{"collect", "-meta", meta, kv}, nil, &out); err == nil {
				t.Errorf("collect = nil error and %q, want an error", out.String())
			}
		})
	}
}

// TestGet: each key's value, one a line, numbers as written.
func TestGet(t *testing.T) {
	const report = `{"mode":"get16","requests":123456,"units_per_s":1.1808e+06,"p50_us":165.5,"first_error":null,"client":false,"ops":{"get16":{"requests":1}},"errors":0}` + "\n"
	for _, tc := range []struct {
		keys []string
		want string
	}{
		{[]string{"requests"}, "123456\n"},
		{[]string{"units_per_s", "p50_us", "errors"}, "1.1808e+06\n165.5\n0\n"},
		{[]string{"mode", "first_error", "client"}, "get16\nnull\nfalse\n"},
		{[]string{"ops"}, `{"get16":{"requests":1}}` + "\n"},
	} {
		var out bytes.Buffer
		if err := run(append([]string{"get"}, tc.keys...), strings.NewReader(report), &out); err != nil {
			t.Errorf("get %v: %v", tc.keys, err)
			continue
		}
		if out.String() != tc.want {
			t.Errorf("get %v = %q, want %q", tc.keys, out.String(), tc.want)
		}
	}
	for _, tc := range []struct {
		name, in string
		keys     []string
	}{
		{"missing key", report, []string{"requests", "p999_us"}},
		{"not JSON", "requests=12\n", []string{"requests"}},
		{"not an object", "[1,2]\n", []string{"requests"}},
		{"no keys", report, nil},
	} {
		if err := run(append([]string{"get"}, tc.keys...), strings.NewReader(tc.in), &bytes.Buffer{}); err == nil {
			t.Errorf("get, %s: nil error, want one", tc.name)
		}
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"draw"}, {"render"}, {"render", "a.json", "b.json"}, {"collect", "1.kv"}} {
		if err := run(args, nil, &bytes.Buffer{}); err == nil {
			t.Errorf("run %q = nil, want an error", args)
		}
	}
}
