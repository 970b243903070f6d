package main

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := loadConfig(nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTP != "127.0.0.1:8080" || cfg.Data != "./data" || cfg.Region != "local" || cfg.FlushInterval != time.Second ||
		cfg.Partitions != 16 || !reflect.DeepEqual(cfg.Regions, []string{"local"}) || !strings.HasPrefix(cfg.AgentID, "local-") {
		t.Fatalf("defaults = %+v", cfg)
	}
}

func TestConfigFile(t *testing.T) {
	cfg, err := loadConfig([]string{"--config", "testdata/good.yaml"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		HTTP: "127.0.0.1:9090", Data: "/var/lib/edgecount", Region: "eu-west", AgentID: "eu-west-a1",
		Regions: []string{"us-east", "eu-west", "ap-south"}, Partitions: 32, FlushInterval: 500 * time.Millisecond,
		CacheTTL: 50 * time.Millisecond, ShutdownTimeout: 20 * time.Second, LogLevel: "debug",
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("config = %+v\nwant %+v", cfg, want)
	}
}

// TestConfigPrecedence: defaults < file < environment < flags.
func TestConfigPrecedence(t *testing.T) {
	e := env(map[string]string{
		"EDGECOUNT_CONFIG":         "testdata/good.yaml",
		"EDGECOUNT_REGION":         "us-east",
		"EDGECOUNT_FLUSH_INTERVAL": "2s",
		"EDGECOUNT_DATA":           "/env/data",
	})
	cfg, err := loadConfig([]string{"--data", "/flag/data"}, e, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "us-east" || cfg.FlushInterval != 2*time.Second || cfg.Data != "/flag/data" || cfg.HTTP != "127.0.0.1:9090" {
		t.Fatalf("config = %+v: want region and flush from env, data from flag, http from file", cfg)
	}
}

// TestConfigErrors: every bad input is reported, all at once.
func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"unknown key", []string{"--config", "testdata/bad-unknown-key.yaml"}, nil, []string{"flush_intervall", "not found"}},
		{"bad type", []string{"--config", "testdata/bad-type.yaml"}, nil, []string{"cannot parse config", "many"}},
		{"bad values", []string{"--config", "testdata/bad-values.yaml"}, nil, []string{
			`http "nonsense"`, `"bad region" is not a valid region`, "partitions 0", "flush interval 1ms", `log_level "loud"`, `region "Global"`}},
		{"missing file", []string{"--config", "testdata/none.yaml"}, nil, []string{"cannot read config"}},
		{"bad env", nil, map[string]string{"EDGECOUNT_FLUSH_INTERVAL": "soon", "EDGECOUNT_PARTITIONS": "x"}, []string{"EDGECOUNT_FLUSH_INTERVAL", "EDGECOUNT_PARTITIONS"}},
		{"global region", []string{"--region", "global"}, nil, []string{`region "global"`}},
		{"stray argument", []string{"extra"}, nil, []string{"unexpected arguments"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(tt.args, env(tt.env), io.Discard)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
