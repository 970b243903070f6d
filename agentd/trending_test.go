package agentd

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgecount/edgecount/agentd/agentdtest"
	"github.com/edgecount/edgecount/config"
	"github.com/edgecount/edgecount/internal/testenv"
)

type trendingJSON struct {
	Region  string `json:"region"`
	Counter string `json:"counter"`
	Window  string `json:"window"`
	AsOf    string `json:"as_of"`
	Items   []struct {
		ContentID string `json:"content_id"`
		Count     int64  `json:"count"`
		Error     int64  `json:"error"`
	} `json:"items"`
}

func (t trendingJSON) String() string {
	s := ""
	for _, it := range t.Items {
		s += fmt.Sprintf("%s=%d±%d ", it.ContentID, it.Count, it.Error)
	}
	return s
}

// waitTrending polls GET /v1/trending?query until its items read want.
func waitTrending(t *testing.T, base, query, want string) {
	t.Helper()
	var got trendingJSON
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("trending %s = %q", query, want), func() (string, bool) {
		got = trendingJSON{}
		agentdtest.Call(t, "GET", base+"/v1/trending?"+query, nil, 200, &got)
		return fmt.Sprintf("%q", got.String()), got.String() == want
	})
	if got.AsOf == "" {
		t.Fatalf("trending %s: no as_of", query)
	}
}

// TestStandaloneTrending: the standalone node's agent ships its lists with
// its partial sums, the in-process rollup stores the regional (local) and
// global lists, and GET /v1/trending reads them; the trending section of
// the configuration file applies.
func TestStandaloneTrending(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "edgecount.yaml")
	if err := os.WriteFile(file, []byte("trending:\n  interval: 50ms\n  counters: [like, view]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startConfig(t, testConfig(t, filepath.Join(dir, "data"), 50*time.Millisecond, func(cfg *config.Config) {
		if err := cfg.LoadFile(file); err != nil {
			t.Fatal(err)
		}
	}))
	base := "http://" + n.Addr()
	agentdtest.Call(t, "POST", base+"/v1/increments", map[string]any{"increments": []map[string]any{
		{"content_id": "video-1", "counter": "view", "delta": 5},
		{"content_id": "video-2", "counter": "view", "delta": 3},
		{"content_id": "video-3", "counter": "view", "delta": 9},
		{"content_id": "video-2", "counter": "share", "delta": 1},
	}}, 202, nil)
	for _, u := range []string{"alice", "bob"} {
		agentdtest.Call(t, "POST", base+"/v1/reactions", map[string]string{"user_id": u, "content_id": "video-2", "action": "like"}, 200, nil)
	}
	waitTrending(t, base, "counter=view&k=2", "video-3=9±0 video-1=5±0 ")
	waitTrending(t, base, "region=local&counter=view&window=24h", "video-3=9±0 video-1=5±0 video-2=3±0 ")
	waitTrending(t, base, "counter=like&window=1h", "video-2=2±0 ")
	// share is not a trending counter in this file, and bad input names its parameter.
	for _, q := range []string{"counter=share", "k=0", "window=2h", "region=mars"} {
		agentdtest.Call(t, "GET", base+"/v1/trending?"+q, nil, 400, nil)
	}
	shutdown(t, n)
}
