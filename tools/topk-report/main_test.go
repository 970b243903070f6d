package main

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/edgecount/edgecount/topk"
)

func TestEvaluateCountsTiesAtTheCut(t *testing.T) {
	ids := []string{"a", "b", "c", "d"}
	exact := []int64{5, 4, 4, 1}
	tr := newTruth(ids, indexOf(ids), exact)
	s := topk.NewSummary(3)
	for i, id := range ids {
		if id != "b" { // b is not tracked
			s.Add(id, exact[i])
		}
	}
	var res result
	evaluate(s, tr, &res)
	// Fewer than 10 items: the cut is the smallest true count, so every
	// tracked item is a hit (3 of 10), and b is missed by recall.
	if res.p10 != 0.3 || res.r10 != 0.75 {
		t.Fatalf("precision@10, recall@10 = %v, %v; want 0.3 (3 true items of 10), 0.75 (b missing)", res.p10, res.r10)
	}
	if res.maxErr != 0 || res.maxBound != 0 {
		t.Fatalf("max err %d, max bound %d; want 0, 0 (exact)", res.maxErr, res.maxBound)
	}
	if tr.kth(2) != 4 || tr.kth(9) != 1 {
		t.Fatalf("kth(2), kth(9) = %d, %d; want 4, 1", tr.kth(2), tr.kth(9))
	}
}

func TestAliasTableFollowsWeights(t *testing.T) {
	w := []float64{1, 2, 3, 4}
	a := newAlias(w)
	r := rand.New(rand.NewPCG(1, 2))
	var got [4]int
	const n = 200000
	for range n {
		got[a.sample(r)]++
	}
	for i, c := range got {
		want := float64(n) * w[i] / 10
		if d := float64(c) - want; d > 0.02*n || d < -0.02*n {
			t.Fatalf("index %d drawn %d times of %d, want about %.0f", i, c, n, want)
		}
	}
}

func TestCMHeapFindsTheLeaders(t *testing.T) {
	ids := makeIDs(1000, 16, 3)
	st := zipfStream("zipf-1.2", ids, 50000, 1.2, 4)
	tr := newTruth(st.ids, indexOf(ids), st.exact)
	c := newCMHeap(64<<10, candidateBytes(cmHeapSize, 16))
	feed(c, st)
	var res result
	evaluate(c, tr, &res)
	if res.p10 != 1 {
		t.Fatalf("cm+heap precision@10 = %v on an easy stream, want 1", res.p10)
	}
	if res.maxBound != -1 {
		t.Fatalf("cm+heap max bound = %d, want -1 (no bound)", res.maxBound)
	}
}

func TestRunSmall(t *testing.T) {
	var out, log bytes.Buffer
	args := []string{"-events", "20000", "-items", "2000", "-sizes", "16,64", "-rounds", "1", "-agents", "3"}
	if err := run(args, &out, &log); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	md := out.String()
	for _, want := range []string{
		"## Targets (docs/design.md)", "| G7 precision@100 at 64 KiB | zipf-0.8 |", "| G8 update ns ÷ map increment ns | zipf-1.2 |",
		"## Stream zipf-0.8", "## Stream bursty", "### Layouts (zipf-1.0)", "### Longer ids",
		"## Merged against one summary", "## Windows on the bursty stream", "## Update speed (G8)", "## Merge and encoding cost",
		"| cm+heap | 16 KiB |", "| space-saving | 64 KiB |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, args := range [][]string{
		{"-sizes", "16,32"},
		{"-sizes", "64,x"},
		{"-events", "10"},
		{"-rounds", "0"},
		{"-agents", "1"},
		{"-nope"},
	} {
		var log bytes.Buffer
		if _, err := parse(args, &log); err == nil {
			t.Errorf("parse(%q) = nil error", args)
		}
	}
}
