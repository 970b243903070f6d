package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/natsjs/natsjstest"
)

// TestAgentOnRegionalServer runs the edge-agent command on its region's own
// JetStream server (domain r1, a leaf node of a real 3-server hub): its
// flushes go to the region's origin stream on the region's own subjects,
// with domain-prefixed ids, it makes the hub's source consumer there, and
// it exports the stream's use of the outage budget.
func TestAgentOnRegionalServer(t *testing.T) {
	cass := testenv.Addr("EDGECOUNT_CASSANDRA", "127.0.0.1:9042")
	testenv.NeedService(t, "Cassandra", cass, "scripts/cassandra.sh start")
	host, port, _ := strings.Cut(cass, ":")
	hub := natsjstest.StartHub(t, 3)
	r1 := natsjstest.StartRegion(t, hub, "r1")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if port == "" {
		port = "9042"
	}
	file := filepath.Join(t.TempDir(), "r1.yaml")
	yaml := "cassandra:\n  hosts: [" + host + "]\n  port: " + port + "\n  keyspace: edgecount_hubtest\n  replication_factor: 1\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"EDGECOUNT_CONFIG": file, "EDGECOUNT_LOG_LEVEL": "warn", "EDGECOUNT_NATS_MAX_AGE": "1h", "EDGECOUNT_NATS_MAX_BYTES": "67108864"}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--nats", r1.URL(), "--nats-domain", "r1", "--region", "r1", "--agent-id", "r1-a1",
			"--data", t.TempDir(), "--http", "127.0.0.1:0", "--flush-interval", "200ms"}, func(k string) string { return env[k] }, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no start line: %v (run: %v)", err, <-done)
	}
	go io.Copy(io.Discard, pr)
	base := strings.Fields(line[strings.Index(line, "http://"):])[0]

	resp, err := http.Post(base+"/v1/increments", "application/json",
		bytes.NewReader([]byte(`{"increments":[{"content_id":"hub-v1","counter":"view","delta":3}]}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST /v1/increments = %d", resp.StatusCode)
	}

	nc, err := nats.Connect(r1.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	var msg jetstream.RawStreamMsg
	testenv.Eventually(t, 20*time.Second, "a flush stored in r1's stream", func() (string, bool) {
		st, err := js.Stream(ctx, "EDGECOUNT_SUMS")
		if err != nil {
			return err.Error(), false
		}
		info := st.CachedInfo()
		if info.State.Msgs == 0 {
			return "empty", false
		}
		m, err := st.GetMsg(ctx, info.State.FirstSeq)
		if err != nil {
			return err.Error(), false
		}
		msg = *m
		return "", true
	})
	if !regexp.MustCompile(`^edgecount\.sums\.r1\.[0-9]+$`).MatchString(msg.Subject) || !strings.HasPrefix(msg.Header.Get("Nats-Msg-Id"), "r1:r1-a1/") {
		t.Errorf("stored %s with id %q; want subject edgecount.sums.r1.<p> and id r1:r1-a1/…", msg.Subject, msg.Header.Get("Nats-Msg-Id"))
	}
	st, err := js.Stream(ctx, "EDGECOUNT_SUMS")
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().Config; c.Retention != jetstream.LimitsPolicy || c.MaxBytes != 64<<20 || c.MaxAge != time.Hour {
		t.Errorf("r1's stream %+v; want limits retention, 64 MiB, 1h", c)
	}
	if _, err := js.PushConsumer(ctx, "EDGECOUNT_SUMS", natsjs.HubConsumer); err != nil {
		t.Errorf("the hub's source consumer on r1: %v", err)
	}
	testenv.Eventually(t, 10*time.Second, "edgecount_region_stream_messages > 0", func() (string, bool) {
		r, err := http.Get(base + "/metrics")
		if err != nil {
			return err.Error(), false
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		m := regexp.MustCompile(`(?m)^edgecount_region_stream_messages (\S+)$`).FindSubmatch(b)
		if m == nil {
			return "no edgecount_region_stream_messages", false
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		lim := regexp.MustCompile(`(?m)^edgecount_region_stream_limit_bytes 6\.7108864e\+07$`).Match(b)
		return string(m[0]), v > 0 && lim
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}
