package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Increment adds Delta (1..1,000,000) to one counter of one item.
type Increment struct {
	ContentID string `json:"content_id"`
	Counter   string `json:"counter"`
	Delta     int64  `json:"delta"`
}

// Increments posts one batch (1..10,000 increments) and returns how many
// the agent accepted.
func (c *Client) Increments(ctx context.Context, incs []Increment) (int, error) {
	var out struct {
		Accepted int `json:"accepted"`
	}
	err := c.do(ctx, request{method: http.MethodPost, path: "/v1/increments", unanswered: c.unanswerd,
		body: struct {
			Increments []Increment `json:"increments"`
		}{incs}}, &out)
	return out.Accepted, err
}

// The actions a user can hold on an item.
const (
	Like    = "like"
	Dislike = "dislike"
	None    = "none"
)

// ReactResult is the answer to React.
type ReactResult struct {
	UserID    string `json:"user_id"`
	ContentID string `json:"content_id"`
	Action    string `json:"action"`
	Previous  string `json:"previous"`
	Version   int64  `json:"version"`
	Changed   bool   `json:"changed"`
}

// React sets userID's reaction to contentID: Like, Dislike or None (undo).
// It is idempotent, so a call without an answer is retried.
func (c *Client) React(ctx context.Context, userID, contentID, action string) (ReactResult, error) {
	var out ReactResult
	err := c.do(ctx, request{method: http.MethodPost, path: "/v1/reactions", unanswered: true,
		body: map[string]string{"user_id": userID, "content_id": contentID, "action": action}}, &out)
	return out, err
}

// Reaction is what a user holds on an item (Action None, Version 0 and no
// UpdatedAt when nothing).
type Reaction struct {
	UserID    string     `json:"user_id"`
	ContentID string     `json:"content_id"`
	Action    string     `json:"action"`
	Version   int64      `json:"version"`
	UpdatedAt *time.Time `json:"updated_at"`
}

// Reaction reads userID's reaction to contentID.
func (c *Client) Reaction(ctx context.Context, userID, contentID string) (Reaction, error) {
	var out Reaction
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/reactions/" + url.PathEscape(userID) + "/" + url.PathEscape(contentID)}, &out)
	return out, err
}

// Reactions reads userID's reactions to contentIDs (1..100), in the order
// asked.
func (c *Client) Reactions(ctx context.Context, userID string, contentIDs ...string) ([]Reaction, error) {
	var out struct {
		Reactions []Reaction `json:"reactions"`
	}
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/reactions/" + url.PathEscape(userID),
		query: url.Values{"content_id": contentIDs}}, &out)
	return out.Reactions, err
}

// Counts are an item's totals in one scope.
type Counts struct {
	ContentID string           `json:"content_id"`
	Region    string           `json:"region"`
	Likes     int64            `json:"likes"`
	Dislikes  int64            `json:"dislikes"`
	Counters  map[string]int64 `json:"counters"`
	UpdatedAt *time.Time       `json:"updated_at"`
	// AsOf is the time the answer reflects: for eventual, when the stored
	// totals were last known current; for fresh, when the held deltas
	// were collected.
	AsOf *time.Time `json:"as_of"`
	// StalenessMs is how long before the answer the stored totals were
	// last known current, when the agent knows it.
	StalenessMs *int64 `json:"staleness_ms,omitempty"`
	// Consistency is "fresh" on a fresh read, empty on an eventual one;
	// MissingPeers names the region peers a fresh read did not hear from.
	Consistency  string   `json:"consistency,omitempty"`
	MissingPeers []string `json:"missing_peers,omitempty"`
}

// Accuracy modes of count reads (ReadOptions.Consistency).
const (
	Eventual = "eventual" // the stored totals (the server's default)
	Fresh    = "fresh"    // plus the deltas the region's agents hold
)

// ReadOptions select a count read's scope and accuracy mode; zero fields
// take the server's defaults (global, eventual).
type ReadOptions struct {
	Region      string
	Consistency string
}

func (o ReadOptions) query(q url.Values) url.Values {
	q = regionQuery(q, o.Region)
	if o.Consistency != "" {
		if q == nil {
			q = url.Values{}
		}
		q.Set("consistency", o.Consistency)
	}
	return q
}

// Count reads one item's totals; region "" means global.
func (c *Client) Count(ctx context.Context, contentID, region string) (Counts, error) {
	return c.CountWith(ctx, contentID, ReadOptions{Region: region})
}

// CountWith reads one item's totals in the scope and mode of o.
func (c *Client) CountWith(ctx context.Context, contentID string, o ReadOptions) (Counts, error) {
	var out Counts
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/counts/" + url.PathEscape(contentID), query: o.query(nil)}, &out)
	return out, err
}

// Counts reads the totals of contentIDs (1..100), in the order asked;
// region "" means global.
func (c *Client) Counts(ctx context.Context, region string, contentIDs ...string) ([]Counts, error) {
	return c.CountsWith(ctx, ReadOptions{Region: region}, contentIDs...)
}

// CountsWith reads the totals of contentIDs (1..100), in the order asked,
// in the scope and mode of o.
func (c *Client) CountsWith(ctx context.Context, o ReadOptions, contentIDs ...string) ([]Counts, error) {
	var out struct {
		Counts []Counts `json:"counts"`
	}
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/counts", query: o.query(url.Values{"content_id": contentIDs})}, &out)
	return out.Counts, err
}

func regionQuery(q url.Values, region string) url.Values {
	if region == "" {
		return q
	}
	if q == nil {
		q = url.Values{}
	}
	q.Set("region", region)
	return q
}

// TrendingQuery selects a trending list; zero fields take the server's
// defaults (global, like, 5m, 10).
type TrendingQuery struct {
	Region, Counter, Window string
	K                       int
}

// Trending is a ranked list: each item's true count is in
// [Count-Error, Count].
type Trending struct {
	Region  string         `json:"region"`
	Counter string         `json:"counter"`
	Window  string         `json:"window"`
	AsOf    *time.Time     `json:"as_of"`
	Items   []TrendingItem `json:"items"`
}

// TrendingItem is one entry of a Trending list.
type TrendingItem struct {
	ContentID string `json:"content_id"`
	Count     int64  `json:"count"`
	Error     int64  `json:"error"`
}

// Trending reads a trending list.
func (c *Client) Trending(ctx context.Context, q TrendingQuery) (Trending, error) {
	v := url.Values{}
	for k, s := range map[string]string{"region": q.Region, "counter": q.Counter, "window": q.Window} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.K != 0 {
		v.Set("k", strconv.Itoa(q.K))
	}
	var out Trending
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/trending", query: v}, &out)
	return out, err
}

// Cluster is the agent's view of its region's gossip members.
type Cluster struct {
	Region          string          `json:"region"`
	Self            string          `json:"self"`
	KeyFingerprints []string        `json:"key_fingerprints"`
	Members         []ClusterMember `json:"members"`
}

// ClusterMember is one gossip member as the agent sees it.
type ClusterMember struct {
	Name     string    `json:"name"`
	Addr     string    `json:"addr"`
	Region   string    `json:"region"`
	AgentID  string    `json:"agent_id"`
	HTTPAddr string    `json:"http_addr"`
	Version  string    `json:"version"`
	State    string    `json:"state"`
	Since    time.Time `json:"since"`
}

// Cluster reads GET /v1/cluster (a 404 Error when the agent runs no
// gossip).
func (c *Client) Cluster(ctx context.Context) (Cluster, error) {
	var out Cluster
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/cluster"}, &out)
	return out, err
}

// RecountResult is one item's answer to Recount.
type RecountResult struct {
	ContentID string `json:"content_id"`
	// Status is clean, repaired, deferred, unrepaired, unknown, not_owned
	// or error.
	Status    string       `json:"status"`
	Partition uint32       `json:"partition"`
	Checked   bool         `json:"checked"`
	Repaired  bool         `json:"repaired"`
	Drift     int64        `json:"drift"`
	Reason    string       `json:"reason,omitempty"`
	Rows      []RecountRow `json:"rows"`
}

// RecountRow is one scope of a recounted item.
type RecountRow struct {
	Scope   string `json:"scope"`
	Exists  bool   `json:"exists"`
	Before  Tally  `json:"before"`
	Counted Tally  `json:"counted"`
	After   Tally  `json:"after"`
}

// Tally is a likes/dislikes pair.
type Tally struct {
	Likes    int64 `json:"likes"`
	Dislikes int64 `json:"dislikes"`
}

// Recount asks a rollup (or a standalone agent) to recount ids now
// (POST /admin/recount); allowLower lets it lower totals on Cassandra.
func (c *Client) Recount(ctx context.Context, allowLower bool, ids ...string) ([]RecountResult, error) {
	var out struct {
		Results []RecountResult `json:"results"`
	}
	err := c.do(ctx, request{method: http.MethodPost, path: "/admin/recount", unanswered: true,
		body: map[string]any{"ids": ids, "allow_lower": allowLower}}, &out)
	return out.Results, err
}

// Ready reports nil when GET /readyz answers 200 (degraded included).
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, request{method: http.MethodGet, path: "/readyz"}, nil)
}
