package cli

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/edgecount/edgecount/buildinfo"
	"github.com/edgecount/edgecount/config"
)

func TestLoadConfig(t *testing.T) {
	env := func(k string) string { return map[string]string{"EDGECOUNT_LOG_LEVEL": "warn"}[k] }
	tests := []struct {
		name      string
		args      []string
		wantLevel string
		wantErr   string
	}{
		{"environment", nil, "warn", ""},
		{"flag over environment", []string{"--log-level", "debug"}, "debug", ""},
		{"extra argument", []string{"extra"}, "", `unexpected arguments: ["extra"]`},
		{"unknown flag", []string{"--nope"}, "", "flag provided but not defined: -nope"},
		{"missing file", []string{"--config", "does-not-exist.yaml"}, "", "does-not-exist.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := LoadConfig("test", config.RoleAgent, tt.args, env, io.Discard, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("LoadConfig(%q) error = %v, want one containing %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadConfig(%q): %v", tt.args, err)
			}
			if cfg.LogLevel != tt.wantLevel {
				t.Errorf("LoadConfig(%q) log level = %q, want %q", tt.args, cfg.LogLevel, tt.wantLevel)
			}
		})
	}
}

// TestLoadConfigListsEveryProblem: a bad flag value of the command's own and
// a bad environment variable are both reported.
func TestLoadConfigListsEveryProblem(t *testing.T) {
	env := func(k string) string { return map[string]string{"EDGECOUNT_RECOUNT_BATCH": "many"}[k] }
	_, err := LoadConfig("test", config.RoleRollup, []string{"--owned", "x"}, env, io.Discard, io.Discard)
	for _, want := range []string{`owned: "x"`, "EDGECOUNT_RECOUNT_BATCH"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadConfig error = %v, want one containing %q", err, want)
		}
	}
}

// TestLoadConfigTLS: --tls-cert and --tls-key set the certificate of the
// command's own listener: agent.tls for an agent, rollup.tls for a rollup.
func TestLoadConfigTLS(t *testing.T) {
	env := func(string) string { return "" }
	args := []string{"--tls-cert", "/c.pem", "--tls-key", "/k.pem"}
	cfg, err := LoadConfig("test", config.RoleAgent, args, env, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agent.TLS != (config.TLS{CertFile: "/c.pem", KeyFile: "/k.pem"}) || cfg.Rollup.TLS.Enabled() {
		t.Errorf("agent: agent.tls %+v, rollup.tls %+v; want the flags in agent.tls only", cfg.Agent.TLS, cfg.Rollup.TLS)
	}
	rollupEnv := func(k string) string { return map[string]string{"EDGECOUNT_NATS_URL": "nats://127.0.0.1:4222"}[k] }
	cfg, err = LoadConfig("test", config.RoleRollup, args, rollupEnv, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Rollup.TLS != (config.TLS{CertFile: "/c.pem", KeyFile: "/k.pem"}) || cfg.Agent.TLS.Enabled() {
		t.Errorf("rollup: rollup.tls %+v, agent.tls %+v; want the flags in rollup.tls only", cfg.Rollup.TLS, cfg.Agent.TLS)
	}
}

// TestLoadConfigFlagsFromTable: every setting with a flag for a role is a
// flag of that role's command, documented by its usage, and sets its
// setting over the environment.
func TestLoadConfigFlagsFromTable(t *testing.T) {
	samples := map[config.Kind]string{
		config.KindString: "x-1", config.KindDuration: "1m30s", config.KindInt: "7",
		config.KindPartitions: "0,3", config.KindHubSources: "us=us,eu=eu/E",
	}
	for _, role := range []config.Role{config.RoleAgent, config.RoleRollup} {
		var help strings.Builder
		if _, err := LoadConfig(role.String(), role, []string{"-h"}, func(string) string { return "" }, io.Discard, &help); err == nil {
			t.Fatalf("%v -h: no error", role)
		}
		n := 0
		for _, s := range config.Settings() {
			if !s.HasFlag(role) {
				continue
			}
			n++
			if !strings.Contains(help.String(), "-"+s.Flag) || !strings.Contains(help.String(), s.Env) {
				t.Errorf("%v help does not show -%s with %s:\n%s", role, s.Flag, s.Env, help.String())
			}
			v, ok := samples[s.Kind()]
			if !ok {
				t.Fatalf("%s: no sample for kind %v", s.Key, s.Kind())
			}
			env := func(k string) string {
				if k == s.Env {
					return "from-env"
				}
				return ""
			}
			cfg, _ := LoadConfig(role.String(), role, []string{"--" + s.Flag, v}, env, io.Discard, io.Discard) // the samples need not validate
			if got := s.Get(&cfg); got != v {
				t.Errorf("%v --%s %s: %s = %q", role, s.Flag, v, s.Key, got)
			}
		}
		if n == 0 {
			t.Errorf("%v has no flags from the table", role)
		}
	}
}

// TestVersion: --version prints one build line on stdout and returns
// ErrVersion before the file or the variables are read (a missing file
// and a bad variable are not reported); --version=false loads as usual.
func TestVersion(t *testing.T) {
	env := func(k string) string {
		return map[string]string{"EDGECOUNT_CONFIG": "does-not-exist.yaml", "EDGECOUNT_PARTITIONS": "many"}[k]
	}
	for _, role := range []config.Role{config.RoleAgent, config.RoleRollup} {
		var stdout, stderr strings.Builder
		_, err := LoadConfig(role.String(), role, []string{"--version"}, env, &stdout, &stderr)
		if !errors.Is(err, ErrVersion) {
			t.Errorf("%v --version: error %v; want ErrVersion", role, err)
		}
		want := buildinfo.Read().Line(role.String()) + "\n"
		if stdout.String() != want || stderr.Len() > 0 {
			t.Errorf("%v --version: stdout %q, stderr %q; want stdout %q alone", role, stdout.String(), stderr.String(), want)
		}
		stdout.Reset()
		_, err = LoadConfig(role.String(), role, []string{"--version=false"}, env, &stdout, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "does-not-exist.yaml") || stdout.Len() > 0 {
			t.Errorf("%v --version=false: error %v, stdout %q; want the missing file reported and nothing printed", role, err, stdout.String())
		}
	}
}
