// Package embeddedtest opens the embedded store for tests: a real bbolt
// file in the test's temporary directory, closed when the test ends.
package embeddedtest

import (
	"path/filepath"
	"testing"

	"github.com/edgecount/edgecount/store/embedded"
)

// Open opens a Store with cfg at a file in tb's temporary directory (cfg's
// Path is ignored) and closes it at cleanup. It fails tb when the store
// cannot be opened.
func Open(tb testing.TB, cfg embedded.Config) *embedded.Store {
	tb.Helper()
	cfg.Path = filepath.Join(tb.TempDir(), "db")
	st, err := embedded.Open(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}
