// Package client is a Go client of the edgecount HTTP API (docs/http-api.md):
// typed calls for every /v1 route and the admin recount, a Batcher that
// coalesces increments by size or time, and retries that honour
// Retry-After.
//
// Every POST carries an Idempotency-Key, the same on each retry of one
// call. A call is retried when the server answered that nothing was
// applied (503, 409, 429), waiting what its Retry-After asks (capped), and
// for reads and reactions also when there was no answer at all. A batch
// of increments without an answer is not retried unless
// WithRetryUnanswered is set. An edge agent honours the key on POST
// /v1/increments and POST /v1/reactions (docs/idempotency.md): within its
// window it applies a key once and answers a retry with the first answer.
// But keys are per agent: a retry that a load balancer sends to another
// agent is applied again, and would count a batch that did apply twice.
//
//	c, err := client.New("http://127.0.0.1:8080")
//	_, err = c.Increments(ctx, []client.Increment{{ContentID: "video-1", Counter: "view", Delta: 1}})
//	counts, err := c.Count(ctx, "video-1", "")
//
//	b := client.NewBatcher(c, client.BatchOptions{MaxIncrements: 100, MaxDelay: 50 * time.Millisecond})
//	defer b.Close()
//	err = b.Add("video-1", "view", 1)
package client
