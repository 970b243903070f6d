package gossip

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/edgecount/edgecount/internal/testenv"
)

// TestQueryAnswers: a query reaches every live member and comes back with
// each one's answer; a member without a handler answers ErrNoHandler's
// text; one that is gone is marked ErrNoAnswer (or a send error) within
// the query's context.
func TestQueryAnswers(t *testing.T) {
	a, _ := startNode(t, testConfig("us", "qa", ""))
	b, _ := startNode(t, testConfig("us", "qb", ""))
	c, _ := startNode(t, testConfig("us", "qc", ""))
	join(t, b, a)
	join(t, c, a)
	testenv.Eventually(t, 10*time.Second, "three live members on a", testenv.Until(func() bool { return a.NumLive() == 3 }))
	b.SetQueryHandler(func(p []byte) ([]byte, error) { return append([]byte("b:"), p...), nil })
	c.SetQueryHandler(func(p []byte) ([]byte, error) { return nil, errors.New("c refuses") })

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	answers, err := a.Query(ctx, []byte("ids"))
	if err != nil || len(answers) != 2 {
		t.Fatalf("Query = %v, %v; want two answers", answers, err)
	}
	for _, ans := range answers {
		switch ans.Node {
		case b.Name():
			if ans.Err != nil || !bytes.Equal(ans.Data, []byte("b:ids")) || ans.AgentID != "qb" {
				t.Errorf("b answered %q, %v (agent %q)", ans.Data, ans.Err, ans.AgentID)
			}
		case c.Name():
			if ans.Err == nil || ans.Err.Error() != "c refuses" {
				t.Errorf("c answered %q, %v; want its error", ans.Data, ans.Err)
			}
		default:
			t.Errorf("answer from %q", ans.Node)
		}
	}

	// c stops without leaving: a still counts it live for a while, and
	// its query must not wait for it past the context (its port refuses
	// the stream, so the send fails at once; a silent host would cost the
	// context's deadline).
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel2()
	start := time.Now()
	answers, err = a.Query(ctx2, []byte("x"))
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("query took %v with a member down", took)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, ans := range answers {
		if ans.Node == c.Name() && ans.Err == nil {
			t.Errorf("a member that is down answered %q", ans.Data)
		}
		if ans.Node == b.Name() && ans.Err != nil {
			t.Errorf("b: %v", ans.Err)
		}
	}
	if st := a.QueryStats(); st.Asked < 3 || st.Answered < 2 || st.Failed < 1 {
		t.Errorf("stats = %+v", st)
	}
}
