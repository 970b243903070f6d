package main

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgecount/edgecount/agentd/agentdtest"
	"github.com/edgecount/edgecount/internal/testenv"
)

// keyedPost sends a JSON body with an Idempotency-Key and returns the
// status, the body and whether the answer was replayed from the key.
func keyedPost(t *testing.T, url, key, body string) (int, string, bool) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed") == "true"
}

// TestIdempotencyKeysSurviveSIGKILL runs the real binary standalone
// (fsync), sends keyed writes, SIGKILLs it and restarts it on its data:
// retries get the first answers and are counted once, both while the keys
// are in the intake log and after flushes moved them to the keys log; a
// different body with a key is a 422; after the window
// (EDGECOUNT_IDEMPOTENCY_WINDOW) the key applies again.
func TestIdempotencyKeysSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a process")
	}
	bin := filepath.Join(t.TempDir(), "edge-agent")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	const window = 4 * time.Second
	t.Setenv("EDGECOUNT_IDEMPOTENCY_WINDOW", window.String())
	args := []string{"--http", "127.0.0.1:0", "--data", t.TempDir(), "--flush-interval", "200ms"}
	kill := func(p *agentProc) {
		t.Helper()
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.cmd.Wait()
	}
	inc := `{"increments":[{"content_id":"keyed","counter":"view","delta":5}]}`
	like := `{"user_id":"u1","content_id":"keyed","action":"like"}`
	wantLike := `{"user_id":"u1","content_id":"keyed","action":"like","previous":"none","version":1,"changed":true}`

	p := startBinary(t, bin, args...)
	if code, body, replayed := keyedPost(t, p.base+"/v1/increments", "inc-1", inc); code != 202 || body != `{"accepted":1}` || replayed {
		t.Fatalf("first increments: %d %s replayed %v", code, body, replayed)
	}
	written := time.Now()
	if code, body, _ := keyedPost(t, p.base+"/v1/reactions", "like-1", like); code != 200 || body != wantLike {
		t.Fatalf("first like: %d %s, want 200 %s", code, body, wantLike)
	}
	retries := func(p *agentProc, stage string) {
		t.Helper()
		if code, body, replayed := keyedPost(t, p.base+"/v1/increments", "inc-1", inc); code != 202 || body != `{"accepted":1}` || !replayed {
			t.Fatalf("%s: increments retry: %d %s replayed %v; want the first answer, replayed", stage, code, body, replayed)
		}
		if code, body, replayed := keyedPost(t, p.base+"/v1/reactions", "like-1", like); code != 200 || body != wantLike || !replayed {
			t.Fatalf("%s: like retry: %d %s replayed %v; want %s, replayed", stage, code, body, replayed, wantLike)
		}
		other := strings.Replace(inc, `"delta":5`, `"delta":6`, 1)
		if code, body, _ := keyedPost(t, p.base+"/v1/increments", "inc-1", other); code != 422 || !strings.Contains(body, `"field":"Idempotency-Key"`) {
			t.Fatalf("%s: other body with the key: %d %s; want 422 naming Idempotency-Key", stage, code, body)
		}
	}
	// Killed at once: the keys are in the intake log only.
	kill(p)
	p = startBinary(t, bin, args...)
	retries(p, "restart 1 (keys in the intake log)")
	want := agentdtest.Counts{ContentID: "keyed", Region: "global", Likes: 1, Counters: map[string]int64{"view": 5}}
	agentdtest.WaitCounts(t, p.base, "keyed", "global", want)
	// Flushed: the intake log is truncated, the keys are in the keys log.
	kill(p)
	p = startBinary(t, bin, args...)
	defer func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		if err := p.cmd.Wait(); err != nil {
			t.Errorf("last run exit: %v\n%s", err, p.stderr.String())
		}
	}()
	retries(p, "restart 2 (keys in the keys log)")
	// After the window the key is a new key.
	time.Sleep(time.Until(written.Add(window + 500*time.Millisecond)))
	if code, body, replayed := keyedPost(t, p.base+"/v1/increments", "inc-1", inc); code != 202 || body != `{"accepted":1}` || replayed {
		t.Fatalf("after the window: %d %s replayed %v; want applied anew", code, body, replayed)
	}
	// The in-process rollup of this run holds its first batch back until
	// the messages the killed run left unacknowledged come again, after
	// the consumer's ack wait (30 s): hence the long wait.
	want.Counters["view"] = 10
	testenv.Eventually(t, 60*time.Second, "counts "+want.String(), func() (string, bool) {
		var got agentdtest.Counts
		agentdtest.Call(t, "GET", p.base+"/v1/counts/keyed", nil, 200, &got)
		return got.String(), got.String() == want.String()
	})
	time.Sleep(time.Second) // five flushes: the retries add nothing
	agentdtest.WaitCounts(t, p.base, "keyed", "global", want)
	testenv.Eventually(t, 5*time.Second, "edgecount_idempotency_keys and _hits_total exported", func() (string, bool) {
		resp, err := http.Get(p.base + "/metrics")
		if err != nil {
			return err.Error(), false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		ok := strings.Contains(string(b), "edgecount_idempotency_keys ") && strings.Contains(string(b), "edgecount_idempotency_hits_total ")
		return fmt.Sprintf("%d bytes of metrics", len(b)), ok
	})
}
