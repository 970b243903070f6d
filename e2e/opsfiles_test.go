package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// alertRules is the part of a Prometheus rule file the test reads.
type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// grafanaDashboard is the part of a Grafana dashboard the test reads.
type grafanaDashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

var metricName = regexp.MustCompile(`\bedgecount_[a-z0-9_]+`)

// opsExprs reads the alert rules and the dashboard in deploy/ and returns
// every PromQL expression in them, by where it is, checking their shape.
func opsExprs(t *testing.T) map[string]string {
	t.Helper()
	exprs := map[string]string{}
	raw, err := os.ReadFile("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules alertRules
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	names := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			switch {
			case r.Alert == "" || r.Expr == "":
				t.Errorf("alerts.yml group %s: a rule without alert or expr: %+v", g.Name, r)
			case names[r.Alert]:
				t.Errorf("alerts.yml: alert %s twice", r.Alert)
			case r.Labels["severity"] == "" || r.Annotations["summary"] == "":
				t.Errorf("alerts.yml: alert %s has no severity label or summary", r.Alert)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("alerts.yml: alert %s: for %q: %v", r.Alert, r.For, err)
				}
			}
			names[r.Alert] = true
			exprs["alert "+r.Alert] = r.Expr
		}
	}
	if len(names) == 0 {
		t.Fatal("alerts.yml has no rules")
	}
	raw, err = os.ReadFile("../deploy/grafana/edgecount.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash grafanaDashboard
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("edgecount.json: %v", err)
	}
	if len(dash.Panels) == 0 {
		t.Fatal("edgecount.json has no panels")
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no targets", p.Title)
		}
		for i, tg := range p.Targets {
			exprs["panel "+p.Title+" #"+string(rune('A'+i))] = tg.Expr
		}
	}
	return exprs
}

// exported returns the metric names in a /metrics answer.
func exported(t *testing.T, base string) map[string]bool {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/metrics = %d, %v", base, resp.StatusCode, err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		out[name] = true
	}
	return out
}

// TestOpsFilesReferenceExportedMetrics checks the operations files in
// deploy/ (Prometheus alert rules, Grafana dashboard) against running
// processes: every metric they name is exported by an edge agent or a
// rollup of a real system (NATS, Redis, Cassandra), so that neither can
// drift from the code.
func TestOpsFilesReferenceExportedMetrics(t *testing.T) {
	exprs := opsExprs(t)
	s := newFaultSystem(t, systemOptions{agents: 1, rollups: 1})
	base := s.agents[0].base()
	// Traffic, so that every labelled series has a child.
	client := &http.Client{Timeout: 10 * time.Second}
	if _, err := send(client, base+"/v1/increments", map[string]any{"increments": []map[string]any{{"content_id": "ops-1", "counter": "view", "delta": 2}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := send(client, base+"/v1/reactions", map[string]any{"user_id": "ops-u", "content_id": "ops-1", "action": "like"}); err != nil {
		t.Fatal(err)
	}
	if resp, err := client.Get(base + "/v1/counts/ops-1"); err == nil {
		resp.Body.Close()
	}
	var have map[string]bool
	var missing []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		have = exported(t, base)
		for name := range exported(t, s.rollups[0].base) {
			have[name] = true
		}
		missing = missing[:0]
		for where, e := range exprs {
			for _, name := range metricName.FindAllString(e, -1) {
				if !have[name] {
					missing = append(missing, name+" ("+where+")")
				}
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second) // gauges of the first flush and apply
	}
	slices.Sort(missing)
	for _, m := range missing {
		t.Errorf("not exported by the agent or the rollup: %s", m)
	}
	t.Logf("%d expressions checked against %d exported metric names", len(exprs), len(have))
}
