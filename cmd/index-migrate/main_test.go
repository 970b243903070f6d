package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/store/cassandra"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBadArguments(t *testing.T) {
	for _, args := range [][]string{{"-nope"}, {"extra"}, {"-keyspace", "Bad-Name"}} {
		var out, errOut bytes.Buffer
		if err := run(t.Context(), args, func(string) string { return "" }, &out, &errOut); err == nil {
			t.Errorf("run(%q) = nil; want an error", args)
		}
	}
}

// TestNothingToMigrate runs the command on a fresh keyspace of the test
// node (the migration itself is tested in store/cassandra).
func TestNothingToMigrate(t *testing.T) {
	addr := testenv.Addr("EDGECOUNT_CASSANDRA", "127.0.0.1:9042")
	testenv.NeedService(t, "Cassandra", addr, "./scripts/cassandra.sh install && ./scripts/cassandra.sh start")
	host, port, _ := net.SplitHostPort(addr)
	ks := fmt.Sprintf("edgecount_test_%016x", rand.Uint64())
	t.Cleanup(func() {
		cfg := cassandra.DefaultConfig()
		cfg.Hosts, cfg.Keyspace = []string{net.JoinHostPort(host, port)}, ks
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cassandra.DropKeyspace(ctx, cfg); err != nil {
			t.Errorf("cannot drop %s: %v", ks, err)
		}
	})
	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"-hosts", net.JoinHostPort(host, port), "-keyspace", ks}, func(string) string { return "" }, &out, &errOut); err != nil {
		t.Fatalf("run: %v (%s)", err, errOut.String())
	}
	if !strings.Contains(out.String(), "nothing to migrate") {
		t.Fatalf("output %q; want nothing to migrate", out.String())
	}
}

// TestRepairOfAFreshKeyspace runs the repair on a fresh keyspace of the
// test node: nothing to write, and the index is recorded complete (the
// repair itself is tested in store/cassandra).
func TestRepairOfAFreshKeyspace(t *testing.T) {
	addr := testenv.Addr("EDGECOUNT_CASSANDRA", "127.0.0.1:9042")
	testenv.NeedService(t, "Cassandra", addr, "./scripts/cassandra.sh install && ./scripts/cassandra.sh start")
	host, port, _ := net.SplitHostPort(addr)
	ks := fmt.Sprintf("edgecount_test_%016x", rand.Uint64())
	cfg := cassandra.DefaultConfig()
	cfg.Hosts, cfg.Keyspace = []string{net.JoinHostPort(host, port)}, ks
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cassandra.DropKeyspace(ctx, cfg); err != nil {
			t.Errorf("cannot drop %s: %v", ks, err)
		}
	})
	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"-hosts", net.JoinHostPort(host, port), "-keyspace", ks, "-repair"}, func(string) string { return "" }, &out, &errOut); err != nil {
		t.Fatalf("run: %v (%s)", err, errOut.String())
	}
	if !strings.Contains(out.String(), "wrote 0 entries, removed 0; the index is complete") {
		t.Fatalf("output %q; want an empty repair", out.String())
	}
	st, err := cassandra.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.IndexComplete(t.Context()) {
		t.Fatal("index not complete after the repair")
	}
}
