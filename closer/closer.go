package closer

import (
	"io"
	"log/slog"
)

// Close closes c, logging a failure as "cannot <what>": at stop, a part
// that does not close cleanly is reported, and the rest still closes.
func Close(logger *slog.Logger, c io.Closer, what string) {
	if err := c.Close(); err != nil {
		logger.Warn("cannot "+what, "err", err)
	}
}

// Stack holds the releases of what a process opened, in the order it
// opened them. The zero value is an empty stack.
type Stack struct {
	releases []func()
}

// Push adds the release of the part opened last.
func (s *Stack) Push(release func()) { s.releases = append(s.releases, release) }

// PushCloser adds the logged Close (see Close) of c, opened last.
func (s *Stack) PushCloser(logger *slog.Logger, c io.Closer, what string) {
	s.Push(func() { Close(logger, c, what) })
}

// Close runs the releases, the last pushed first, and empties the stack:
// a second Close does nothing.
func (s *Stack) Close() {
	for i := len(s.releases) - 1; i >= 0; i-- {
		s.releases[i]()
	}
	s.releases = nil
}
