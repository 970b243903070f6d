package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
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
		config.KindString: "x-1", config.KindDuration: "1m30s", config.KindInt: "7", config.KindBool: "true",
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
			cfg, _ := LoadConfig(role.String(), role, []string{"--" + s.Flag + "=" + v}, env, io.Discard, io.Discard) // the samples need not validate
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

// TestLogger: each log format writes records a reader of that format
// parses (json: one object a line; text: key=value lines), at the
// configured level; a format that is neither is refused naming
// log_format, from a flag or the environment.
func TestLogger(t *testing.T) {
	none := func(string) string { return "" }
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			cfg, err := LoadConfig("test", config.RoleAgent, []string{"--log-format", format, "--log-level", "info"}, none, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			logger := Logger(&out, cfg).With("component", "test")
			logger.Debug("not shown")
			logger.Info("started", "region", "local", "note", `quoted "text" and spaces`)
			logger.Warn("second", "n", 2)
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(lines) != 2 {
				t.Fatalf("%d lines; want 2 (debug is below the level):\n%s", len(lines), out.String())
			}
			for i, want := range []map[string]string{
				{"level": "INFO", "msg": "started", "component": "test", "region": "local", "note": `quoted "text" and spaces`},
				{"level": "WARN", "msg": "second", "component": "test", "n": "2"},
			} {
				got := parseLine(t, format, lines[i])
				for k, v := range want {
					if got[k] != v {
						t.Errorf("line %d %q: %s = %q; want %q", i, lines[i], k, got[k], v)
					}
				}
				if got["time"] == "" {
					t.Errorf("line %d %q has no time", i, lines[i])
				}
			}
		})
	}
	for _, tt := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"--log-format", "xml"}, nil},
		{nil, map[string]string{"EDGECOUNT_LOG_FORMAT": "xml"}},
	} {
		_, err := LoadConfig("test", config.RoleRollup, append(tt.args, "--nats", "nats://127.0.0.1:4222"),
			func(k string) string { return tt.env[k] }, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), `log_format "xml": want text or json`) {
			t.Errorf("LoadConfig(%q, env %v) error = %v; want log_format \"xml\" refused", tt.args, tt.env, err)
		}
	}
}

// parseLine reads one log line of format into its keys and values: json
// with encoding/json, text as slog's TextHandler writes it (key=value,
// a value quoted with strconv.Quote when it needs to be).
func parseLine(t *testing.T, format, line string) map[string]string {
	t.Helper()
	out := map[string]string{}
	if format == "json" {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("json line %q does not decode: %v", line, err)
		}
		for k, v := range m {
			out[k] = fmt.Sprint(v)
		}
		return out
	}
	for rest := line; rest != ""; {
		key, after, ok := strings.Cut(rest, "=")
		if !ok || key == "" || strings.ContainsAny(key, " \"") {
			t.Fatalf("text line %q: no key=value at %q", line, rest)
		}
		var value string
		if strings.HasPrefix(after, `"`) {
			q, err := strconv.QuotedPrefix(after)
			if err != nil {
				t.Fatalf("text line %q: bad quoted value at %q: %v", line, after, err)
			}
			value, _ = strconv.Unquote(q)
			after = after[len(q):]
		} else {
			value, after, _ = strings.Cut(after, " ")
			after = " " + after
		}
		out[key] = value
		rest = strings.TrimPrefix(after, " ")
	}
	return out
}

// TestBoolFlag: a bool setting's flag is given alone or with its value,
// overrides the environment either way, and leaves it alone when not
// given; a value that is not a bool fails the parse naming the flag.
func TestBoolFlag(t *testing.T) {
	tests := []struct {
		args    []string
		env     string
		want    bool
		wantErr string
	}{
		{nil, "", false, ""},
		{nil, "true", true, ""},
		{[]string{"--debug-pprof"}, "", true, ""},
		{[]string{"--debug-pprof=true"}, "false", true, ""},
		{[]string{"--debug-pprof=false"}, "true", false, ""},
		{[]string{"--debug-pprof=maybe"}, "", false, `invalid boolean value "maybe" for -debug-pprof`},
		{nil, "maybe", false, `EDGECOUNT_DEBUG_PPROF: strconv.ParseBool: parsing "maybe": invalid syntax`},
	}
	for _, tt := range tests {
		env := func(k string) string { return map[string]string{"EDGECOUNT_DEBUG_PPROF": tt.env}[k] }
		cfg, err := LoadConfig("test", config.RoleAgent, tt.args, env, io.Discard, io.Discard)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("LoadConfig(%q, env %q) error = %v; want one containing %q", tt.args, tt.env, err, tt.wantErr)
			}
			continue
		}
		if err != nil || cfg.Debug.Pprof != tt.want {
			t.Errorf("LoadConfig(%q, env %q) = debug.pprof %v, %v; want %v", tt.args, tt.env, cfg.Debug.Pprof, err, tt.want)
		}
	}
}
