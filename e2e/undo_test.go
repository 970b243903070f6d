package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/edgecount/edgecount/client"
)

// TestTogglesAcrossCassandraPause: 32 users cycle like → dislike → undo
// while the Cassandra JVM is frozen for 8 s. Writes in flight when it
// freezes lose their answers; each must be settled either way, so that
// after the users retry their last failed reaction the totals equal a
// recount of the rows. A plain DELETE for undo failed this (the store could
// not tell its own delete from a competitor's), which is why Cassandra
// undo writes a marker row.
func TestTogglesAcrossCassandraPause(t *testing.T) {
	natsAddr, redisAddr, cassAddr := faultServers(t, true)
	pid := cassandraPID(t)
	agentBin, rollupBin := binaries(t)
	cfgFile, run := faultConfig(t, natsAddr, redisAddr, cassAddr)
	start(t, "rollup", rollupBin, "--config", cfgFile, "--http", "127.0.0.1:0")
	ag := start(t, "edge-agent", agentBin, "--config", cfgFile, "--http", "127.0.0.1:0", "--agent-id", "us-east-"+run, "--data", t.TempDir())
	c := newClient(ag.base, 60*time.Second) // one request a call: the test counts the answers

	resume := resumer(t, pid)
	defer resume()

	var users []string
	for i := 0; i < 32; i++ {
		users = append(users, fmt.Sprintf("w%d", i))
	}
	var (
		stop   atomic.Bool
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed = map[string]reaction{} // each user's last reaction, if it did not answer 200
		codes  = map[int]int{}
	)
	for _, u := range users {
		wg.Go(func() {
			acts := []string{"like", "dislike", "none"}
			for i := 0; !stop.Load(); i++ {
				r := reaction{u, "clip", acts[i%3]}
				status, err := answerOf(react(c, r))
				mu.Lock()
				codes[status]++
				if err != nil || status != http.StatusOK {
					failed[u] = r
				} else {
					delete(failed, u)
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(2 * time.Second) // traffic before the freeze
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(8 * time.Second) // writes in flight lose their answers
	stop.Store(true)
	resume()
	wg.Wait()
	t.Logf("answers by status: %v; users whose last reaction failed: %d", codes, len(failed))
	if codes[http.StatusServiceUnavailable] == 0 {
		t.Fatalf("no reaction answered 503 while Cassandra was frozen: %v", codes)
	}

	deadline := time.Now().Add(60 * time.Second)
	for _, r := range failed {
		for {
			err := react(c, r)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("retry of %v still fails: %v", r, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	want := recount(t, ag.base, "clip", users)
	waitCounts(t, ag.base, "clip", "global", want)
	waitCounts(t, ag.base, "clip", "us-east", want)
}

// react sends r through c.
func react(c *client.Client, r reaction) error {
	_, err := c.React(context.Background(), r.User, r.Content, r.Action)
	return err
}
