package main

import (
	"io"
	"strings"
	"testing"
)

// TestFlagsOverrideEnvironmentAndFile: flags are applied last.
func TestFlagsOverrideEnvironmentAndFile(t *testing.T) {
	getenv := func(k string) string {
		return map[string]string{"EDGECOUNT_CONFIG": "../../config/testdata/good.yaml", "EDGECOUNT_DATA": "/env/data", "EDGECOUNT_REGION": "us-east"}[k]
	}
	cfg, err := loadConfig([]string{"--data", "/flag/data", "--http", "127.0.0.1:7000"}, getenv, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agent.Data != "/flag/data" || cfg.Agent.HTTP != "127.0.0.1:7000" || cfg.Region != "us-east" || cfg.Agent.ID != "eu-west-a1" {
		t.Fatalf("config = %+v", cfg)
	}
}

func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{{"extra"}, {"--region", "global"}, {"--flush-interval", "soon"}} {
		if _, err := loadConfig(args, func(string) string { return "" }, io.Discard, io.Discard); err == nil {
			t.Errorf("loadConfig(%q) accepted", args)
		}
	}
	_, err := loadConfig([]string{"--region", "global"}, func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `region "global"`) {
		t.Fatalf("error = %v", err)
	}
}
