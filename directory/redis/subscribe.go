package redis

import (
	"context"
	"errors"
	"fmt"
	"net"

	goredis "github.com/redis/go-redis/v9"

	"github.com/edgecount/edgecount/backoff"
)

// subscribeLoop receives invalidations. go-redis reconnects and
// resubscribes after a connection error; every confirmed subscription
// (the first one included) makes the directory healthy and asks for a
// resync, since messages published while it was not subscribed are lost.
// When nothing arrives for PingInterval it pings over the subscription;
// when the ping stays unanswered for ReadTimeout it drops the connection
// and subscribes on a new one.
func (d *Directory) subscribeLoop() {
	ctx := d.ctx
	ps := d.subscribe(ctx)
	if ps == nil {
		return
	}
	// Close the latest subscription however the loop ends; Close of the
	// Directory closes it too, to end a Receive in progress.
	defer func() { _ = ps.Close() }()
	failures := 0
	pinged := false
	for {
		wait := d.cfg.PingInterval
		if pinged {
			wait = d.cfg.ReadTimeout // the budget of any reply
		}
		msg, err := ps.ReceiveTimeout(ctx, wait)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			switch {
			case !isTimeout(err):
			case !pinged:
				perr := ps.Ping(ctx)
				if perr == nil {
					pinged = true
					continue
				}
				err = fmt.Errorf("cannot ping over the subscription: %w", perr)
			default:
				err = errors.New("no answer to a ping over the subscription")
				_ = ps.Close()
				if ps = d.subscribe(ctx); ps == nil {
					return
				}
			}
			pinged = false
			d.setDown(err)
			failures++
			if !backoff.Sleep(ctx, retryDelay(failures)) {
				return
			}
			continue
		}
		failures = 0
		pinged = false
		switch m := msg.(type) {
		case *goredis.Subscription:
			if m.Kind == "subscribe" && m.Channel == d.cfg.Channel {
				d.setUp()
				select {
				case d.resyncCh <- struct{}{}:
				default: // one is already pending
				}
			}
		case *goredis.Message:
			d.handleMessage(m.Payload)
		case *goredis.Pong:
			// The connection answers.
		}
	}
}

// subscribe starts a subscription (its connection may fail and be retried
// by Receive) and makes it the one Close closes. It returns nil once the
// directory is closing.
func (d *Directory) subscribe(ctx context.Context) *goredis.PubSub {
	d.psMu.Lock()
	defer d.psMu.Unlock()
	if ctx.Err() != nil {
		return nil
	}
	d.ps = d.client.Subscribe(ctx, d.cfg.Channel)
	return d.ps
}

func (d *Directory) handleMessage(payload string) {
	contentID, counter, err := decodeInvalidation(payload)
	if err != nil {
		if d.stats.badMessages.Add(1) == 1 {
			d.log.Warn("ignoring a bad invalidation message (logged once)", "channel", d.cfg.Channel, "err", err)
		}
		return
	}
	d.invalidate(contentID, counter)
}

func (d *Directory) setUp() {
	if !d.up.Swap(true) {
		d.log.Info("subscribed to directory invalidations", "channel", d.cfg.Channel)
	}
}

func (d *Directory) setDown(err error) {
	if d.up.Swap(false) {
		d.log.Warn("lost the directory invalidation subscription; answering from the cache and defaults", "err", err)
	}
}

// isTimeout reports whether err is a read deadline passing, which for
// ReceiveTimeout means only that nothing arrived.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() && !errors.Is(err, context.DeadlineExceeded)
}
