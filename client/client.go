package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client calls one edgecount agent (or rollup, for the admin calls). It is
// safe for concurrent use.
type Client struct {
	base      *url.URL
	hc        *http.Client
	token     string
	attempts  int
	minWait   time.Duration
	maxWait   time.Duration
	unanswerd bool
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the http.Client (default: one with a 10 s timeout).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithToken sends Authorization: Bearer token on every request.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithRetries sets how many times a call is attempted in all (default 4; 1
// disables retries) and the wait between attempts when the server names
// none: from min, doubling, at most max (default 50 ms, 2 s). A
// Retry-After the server sends is honoured, capped at max.
func WithRetries(attempts int, min, max time.Duration) Option {
	return func(c *Client) { c.attempts, c.minWait, c.maxWait = max1(attempts), min, max }
}

// WithRetryUnanswered also retries a POST /v1/increments that got no answer
// at all (connection lost, timeout), with the same Idempotency-Key. An
// edge agent applies a key once within its window (agent.idempotency,
// 24 h by default) and answers the retry with the first answer; keys are
// per agent, so this is safe only while the retry reaches the same agent
// (a load balancer with affinity, or one agent). Otherwise such a retry
// may count the batch twice. Reactions are retried either way: setting a
// reaction twice is setting it once.
func WithRetryUnanswered(on bool) Option { return func(c *Client) { c.unanswerd = on } }

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

// New returns a client of the server at baseURL (e.g.
// "http://127.0.0.1:8080").
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want http(s)://host:port", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	c := &Client{base: u, hc: &http.Client{Timeout: 10 * time.Second}, attempts: 4, minWait: 50 * time.Millisecond, maxWait: 2 * time.Second}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Error is an answer other than 2xx: the API's {"error","field"} body,
// the status and the Retry-After the server asked for (0 when none).
type Error struct {
	Status     int
	Message    string
	Field      string
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("edgecount: %d: %s (field %s)", e.Status, e.Message, e.Field)
	}
	return fmt.Sprintf("edgecount: %d: %s", e.Status, e.Message)
}

// Retryable reports whether the server said that nothing was applied and
// a retry may succeed: 503 (unavailable, shedding), 409 (contended), 429.
func (e *Error) Retryable() bool {
	return e.Status == http.StatusServiceUnavailable || e.Status == http.StatusConflict || e.Status == http.StatusTooManyRequests
}

// request is one logical call, sent up to Client.attempts times.
type request struct {
	method, path string
	query        url.Values
	body         any
	// unanswered reports whether a call without an answer is retried.
	unanswered bool
}

// do runs r and decodes a 2xx answer into out (nil: discard).
func (c *Client) do(ctx context.Context, r request, out any) error {
	var payload []byte
	if r.body != nil {
		var err error
		if payload, err = json.Marshal(r.body); err != nil {
			return fmt.Errorf("edgecount: cannot encode request: %w", err)
		}
	}
	u := *c.base
	u.Path += r.path
	u.RawQuery = r.query.Encode()
	key := ""
	if r.method == http.MethodPost {
		key = newKey()
	}
	wait := c.minWait
	for attempt := 1; ; attempt++ {
		err := c.once(ctx, r.method, u.String(), payload, key, out)
		if err == nil || attempt >= c.attempts {
			return err
		}
		var ae *Error
		switch {
		case errors.As(err, &ae) && ae.Retryable():
			if ae.RetryAfter > 0 {
				wait = min(ae.RetryAfter, c.maxWait)
			}
		case errors.As(err, &ae), ctx.Err() != nil:
			return err // a definite answer, or the caller gave up
		case r.method != http.MethodGet && !r.unanswered:
			return err // no answer: it may have applied
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, c.maxWait)
	}
}

func (c *Client) once(ctx context.Context, method, u string, payload []byte, key string, out any) error {
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return fmt.Errorf("edgecount: %w", err)
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("edgecount: %s %s: %w", method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("edgecount: %s %s: reading the answer: %w", method, req.URL.Path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{Status: resp.StatusCode}
		var eb struct {
			Error string `json:"error"`
			Field string `json:"field"`
		}
		if json.Unmarshal(raw, &eb) == nil && eb.Error != "" {
			e.Message, e.Field = eb.Error, eb.Field
		} else {
			e.Message = strings.TrimSpace(string(raw))
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			e.RetryAfter = time.Duration(s) * time.Second
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("edgecount: %s %s: cannot decode the answer: %w", method, req.URL.Path, err)
	}
	return nil
}

// newKey returns a random Idempotency-Key: 32 hex digits.
func newKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}
