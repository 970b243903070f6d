// Package clitest holds what the commands' tests share.
package clitest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/edgecount/edgecount/cmd/internal/cli"
)

// CheckVersion runs run (the command name's) with args, which ask for
// the version, and the environment env, and requires what every command
// does: cli.ErrVersion, and one line on stdout starting "name version=",
// nothing on stderr. Give args and env that would fail any start (a
// missing config file, an address that never answers), so that the test
// fails if the command went on past the version.
func CheckVersion(t testing.TB, name string, run cli.RunFunc, args []string, env map[string]string) {
	t.Helper()
	var stdout, stderr strings.Builder
	err := run(context.Background(), args, func(k string) string { return env[k] }, &stdout, &stderr)
	if !errors.Is(err, cli.ErrVersion) {
		t.Fatalf("%s %s = %v; want cli.ErrVersion", name, strings.Join(args, " "), err)
	}
	if out := stdout.String(); !strings.HasPrefix(out, name+" version=") || strings.Count(out, "\n") != 1 || stderr.Len() > 0 {
		t.Errorf("%s %s: stdout %q, stderr %q; want one line starting %s version=", name, strings.Join(args, " "), out, stderr.String(), name)
	}
}
