// Package agentdtest holds what the tests of an edge-agent share, whether
// they start it in-process (package agentd) or run the edge-agent binary:
// JSON calls to its HTTP API and the polling of an item's totals. It is
// for tests only.
package agentdtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/edgecount/edgecount/client"
	"github.com/edgecount/edgecount/internal/testenv"
)

// Call sends method url with body (JSON; nil for none), fails t unless the
// answer's status is wantStatus, and decodes the answer into out (unless
// nil).
func Call(t testing.TB, method, url string, body any, wantStatus int, out any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantStatus {
		t.Fatalf("%s %s = %d %s, want %d", method, url, resp.StatusCode, data, wantStatus)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: cannot decode %s: %v", method, url, data, err)
		}
	}
}

// Counts is the answer of GET /v1/counts/{id}, which String reduces to
// the totals.
type Counts client.Counts

// String gives the totals, which is what WaitCounts compares.
func (c Counts) String() string {
	return fmt.Sprintf("likes=%d dislikes=%d counters=%v", c.Likes, c.Dislikes, c.Counters)
}

// WaitCounts polls the API at base until the item's totals in region equal
// want's.
func WaitCounts(t testing.TB, base, id, region string, want Counts) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("counts of %s in %s = %v", id, region, want), func() (string, bool) {
		var got Counts
		Call(t, "GET", base+"/v1/counts/"+id+"?region="+region, nil, 200, &got)
		return fmt.Sprintf("counts %v", got), got.String() == want.String()
	})
}
