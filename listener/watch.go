package listener

import (
	"os"
	"os/signal"
	"syscall"
)

// Watch runs a reload on every SIGHUP until Close.
type Watch struct {
	stop chan struct{}
	done chan struct{}
}

// onHUP calls reload on every SIGHUP, one call at a time, until the
// returned watch is closed.
func onHUP(reload func()) *Watch {
	w := &Watch{stop: make(chan struct{}), done: make(chan struct{})}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer close(w.done)
		defer signal.Stop(hup)
		for {
			select {
			case <-w.stop:
				return
			case <-hup:
				reload()
			}
		}
	}()
	return w
}

// Close stops the reloads and waits for a reload in progress; it is safe
// on a nil watch.
func (w *Watch) Close() error {
	if w != nil {
		close(w.stop)
		<-w.done
	}
	return nil
}
