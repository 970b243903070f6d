package natsjs

import (
	"strings"
	"testing"
)

// TestRegionalStreamConfig: an origin stream has its region's subjects and
// ids, a hub stream none of its own, and every bad combination is named.
func TestRegionalStreamConfig(t *testing.T) {
	o := testStreamConfig(2)
	o.Domain = "us-east"
	if got := o.Subject(1); got != "test.sums.us-east.1" {
		t.Errorf("origin subject %q", got)
	}
	if got := o.MsgID("a/1/2/1"); got != "us-east:a/1/2/1" {
		t.Errorf("origin msg id %q", got)
	}
	if js := o.jetstream(); js.Retention.String() != "Limits" || js.Subjects[0] != "test.sums.us-east.0" {
		t.Errorf("origin stream %+v", js)
	}
	h := testStreamConfig(2)
	h.Hub = &Hub{Sources: []Source{{Region: "us-east", Domain: "us-east"}, {Region: "eu", Domain: "eu", Stream: "OTHER"}}}
	js := h.jetstream()
	if len(js.Subjects) != 0 || len(js.Sources) != 2 || js.Sources[1].Name != "OTHER" || js.Sources[0].Name != "TEST_SUMS" ||
		js.Sources[0].Consumer.DeliverSubject != "test.sums-hub.us-east" || js.Sources[0].SubjectTransforms[0].Source != "test.sums.us-east.*" ||
		js.Duplicates != h.DuplicateWindow {
		t.Errorf("hub stream %+v", js)
	}
	if h.Subject(1) != "test.sums.1" || h.MsgID("x") != "x" {
		t.Errorf("hub subject %q, id %q", h.Subject(1), h.MsgID("x"))
	}
	for _, tc := range []struct {
		mod  func(*StreamConfig)
		want string
	}{
		{func(c *StreamConfig) { c.Domain = "us.east" }, `domain "us.east"`},
		{func(c *StreamConfig) { c.MaxBytes = -1 }, "max bytes -1"},
		{func(c *StreamConfig) { c.Domain, c.Hub = "x", &Hub{Sources: []Source{{Region: "a", Domain: "a"}}} }, "cannot also have sources"},
		{func(c *StreamConfig) { c.Hub = &Hub{} }, "at least one source"},
		{func(c *StreamConfig) {
			c.Hub = &Hub{Sources: []Source{{Region: "a", Domain: "d"}, {Region: "b", Domain: "d"}}}
		}, `domain "d" is listed twice`},
		{func(c *StreamConfig) { c.Hub = &Hub{Sources: []Source{{Region: "a b", Domain: "d>", Stream: "s.t"}}} }, `region "a b"`},
	} {
		c := testStreamConfig(2)
		tc.mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want it to name %s", err, tc.want)
		}
	}
	if err := (ConnConfig{Domain: "a b"}).Validate(); err == nil || !strings.Contains(err.Error(), `domain "a b"`) {
		t.Errorf("conn config with a bad domain: %v", err)
	}
}
