package closer

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/edgecount/edgecount/internal/testenv"
)

type closeFunc func() error

func (f closeFunc) Close() error { return f() }

// TestStackClosesInReverse: the releases run last pushed first, once; a
// part that fails to close is logged by name and the rest still close.
func TestStackClosesInReverse(t *testing.T) {
	logs := &testenv.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	var got []string
	var s Stack
	s.Push(func() { got = append(got, "store") })
	s.PushCloser(logger, closeFunc(func() error {
		got = append(got, "bus")
		return errors.New("already closed")
	}), "drain broker connection")
	s.Push(func() { got = append(got, "listener") })
	s.Close()
	s.Close()
	if want := []string{"listener", "bus", "store"}; !slices.Equal(got, want) {
		t.Errorf("closed %q; want %q, each once", got, want)
	}
	if !strings.Contains(logs.String(), `msg="cannot drain broker connection" err="already closed"`) {
		t.Errorf("log %q; want the failed close named", logs.String())
	}
}
