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
// freezes lose their answers (503) or, when the serial read that settles
// their open outcome reaches the resumed node, are answered late (this
// depends on where the freeze falls in their timeouts, so the test accepts
// either); each must be settled either way, so that
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
		hit    int // answers that failed or took longer than slowAnswer
	)
	// A reaction in flight when the JVM froze either fails or, when the
	// serial read that settles its open outcome reaches the resumed node, is
	// answered late: either shows that the freeze hit the write path.
	const slowAnswer = 4 * time.Second
	for _, u := range users {
		wg.Go(func() {
			acts := []string{"like", "dislike", "none"}
			for i := 0; !stop.Load(); i++ {
				r := reaction{u, "clip", acts[i%3]}
				sent := time.Now()
				status, err := answerOf(react(c, r))
				took := time.Since(sent)
				mu.Lock()
				codes[status]++
				if took > slowAnswer || err != nil || status != http.StatusOK {
					hit++
				}
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
	t.Logf("answers by status: %v; failed or slower than %v: %d; users whose last reaction failed: %d", codes, slowAnswer, hit, len(failed))
	if hit == 0 {
		t.Fatalf("no reaction failed or was late while Cassandra was frozen: %v", codes)
	}
	if codes[http.StatusOK] == 0 {
		t.Fatalf("no reaction succeeded: %v", codes)
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
