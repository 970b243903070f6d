package httpapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/apijson"
	"github.com/edgecount/edgecount/region"
)

// Defaults and bounds of GET /v1/trending.
const (
	defaultTrendingK = 10
	maxTrendingK     = region.MaxTrendingK
)

// trendingParams is the validated query of GET /v1/trending.
type trendingParams struct {
	scope, counter, window string
	k                      int
}

// trendingQuery parses ?region=R|global&counter=C&window=W&k=N; every
// parameter is optional (global, like, 5m, 10) and may be given once.
func (a *api) trendingQuery(r *http.Request) (trendingParams, *apiError) {
	q := trendingParams{scope: engagement.GlobalScope, counter: engagement.CounterLike, window: engagement.Window5m, k: defaultTrendingK}
	seen := map[string]bool{}
	e := eachParam(r.URL.RawQuery, func(k, v string) *apiError {
		switch k {
		case "region", "counter", "window", "k":
		default:
			return badField(fieldName(k), "is not a known query parameter")
		}
		if seen[k] {
			return badField(k, msgDup)
		}
		seen[k] = true
		switch k {
		case "region":
			if !a.scopes[v] {
				return badField("region", "must be one of "+a.scopeList)
			}
			q.scope = v
		case "counter":
			if !engagement.ValidCounter(v) {
				return badField("counter", "must match [a-z][a-z0-9_]{0,31}")
			}
			q.counter = v
		case "window":
			if _, ok := engagement.WindowSpan(v); !ok {
				return badField("window", "must be one of "+strings.Join(engagement.TrendingWindows(), ", "))
			}
			q.window = v
		case "k":
			n, ok := parseK(v)
			if !ok {
				return badField("k", "must be an integer from 1 to "+strconv.Itoa(maxTrendingK))
			}
			q.k = n
		}
		return nil
	})
	if e != nil {
		return q, e
	}
	if !a.trending[q.counter] {
		return q, a.untracked(q.counter)
	}
	return q, nil
}

// untracked is the answer for a counter without trending lists.
func (a *api) untracked(counter string) *apiError {
	kept := slices.Sorted(func(yield func(string) bool) {
		for c := range a.trending {
			if !yield(c) {
				return
			}
		}
	})
	if len(kept) == 0 {
		return badField("counter", "has no trending list: trending is off on this agent")
	}
	return badField("counter", "has no trending list; kept for: "+strings.Join(kept, ", "))
}

// parseK accepts 1 to 4 decimal digits whose value is 1..maxTrendingK.
func parseK(s string) (int, bool) {
	if len(s) == 0 || len(s) > 4 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n >= 1 && n <= maxTrendingK
}

func (a *api) getTrending(w http.ResponseWriter, r *http.Request) {
	q, e := a.trendingQuery(r)
	if e != nil {
		a.writeError(w, e)
		return
	}
	var (
		t   region.TrendingAnswer
		err error
	)
	marked := false
	if v, ok := a.svc.(trendingViewer); ok {
		t, err = v.TrendingView(r.Context(), q.scope, q.counter, q.window, q.k)
		marked = true
	} else {
		t.Trending, err = a.svc.Trending(r.Context(), q.scope, q.counter, q.window, q.k)
	}
	if errors.Is(err, region.ErrNotTracked) {
		a.writeError(w, a.untracked(q.counter))
		return
	}
	if err != nil {
		a.serviceError(w, r, err)
		return
	}
	a.answer(w, http.StatusOK, func(dst []byte) []byte { return appendTrending(dst, q, t, marked) })
}

// trendingViewer is a service that says what its trending answers count
// (the agent does): the answer then carries regions, region_as_of and
// complete.
type trendingViewer interface {
	TrendingView(ctx context.Context, scope, counter, window string, k int) (region.TrendingAnswer, error)
}

// appendTrending appends the answer of GET /v1/trending: at most q.k
// items, as the service ranked them, and with marked what it counts.
func appendTrending(dst []byte, q trendingParams, t region.TrendingAnswer, marked bool) []byte {
	dst = append(dst, `{"region":`...)
	dst = apijson.AppendString(dst, q.scope)
	dst = append(dst, `,"counter":`...)
	dst = apijson.AppendString(dst, q.counter)
	dst = append(dst, `,"window":`...)
	dst = apijson.AppendString(dst, q.window)
	dst = append(dst, `,"as_of":`...)
	dst = appendTime(dst, t.AsOf)
	dst = append(dst, `,"items":[`...)
	for i, it := range t.Items[:min(len(t.Items), q.k)] {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"content_id":`...)
		dst = apijson.AppendString(dst, it.ContentID)
		dst = append(dst, `,"count":`...)
		dst = strconv.AppendInt(dst, it.Count, 10)
		dst = append(dst, `,"error":`...)
		dst = strconv.AppendInt(dst, it.Error, 10)
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	if marked {
		dst = append(dst, `,"regions":[`...)
		for i, r := range t.Regions {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = apijson.AppendString(dst, r.Region)
		}
		dst = append(dst, `],"region_as_of":[`...)
		all := append(slices.Clone(t.Regions), t.Behind...)
		slices.SortFunc(all, func(a, b engagement.RegionAsOf) int { return strings.Compare(a.Region, b.Region) })
		for i, r := range all {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"region":`...)
			dst = apijson.AppendString(dst, r.Region)
			dst = append(dst, `,"as_of":`...)
			dst = appendTime(dst, r.AsOf)
			dst = append(dst, '}')
		}
		dst = append(dst, `],"complete":`...)
		dst = strconv.AppendBool(dst, t.Complete)
	}
	return append(dst, '}')
}
