package linearize

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/edgecount/edgecount/engagement"
)

const (
	none    = engagement.ActionNone
	like    = engagement.ActionLike
	dislike = engagement.ActionDislike
)

var t0 = time.Unix(1_700_000_000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// w is an answered write through site of action over previous, in [call, ret] ms.
func w(key string, site int, action, previous engagement.Action, call, ret int) Op {
	return Op{Key: key, Site: site, Kind: Write, Action: action, Previous: previous, Changed: action != previous,
		Outcome: Applied, Call: at(call), Return: at(ret)}
}

// r is a read through site that returned action, in [call, ret] ms.
func r(key string, site int, action engagement.Action, call, ret int) Op {
	return Op{Key: key, Site: site, Kind: Read, Action: action, Call: at(call), Return: at(ret)}
}

func unknown(key string, site int, action engagement.Action, call int) Op {
	return Op{Key: key, Site: site, Kind: Write, Action: action, Outcome: Unknown, Call: at(call)}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name   string
		ops    []Op
		rule   ReadRule
		failed []string // nil: linearizable
	}{
		{"sequential chain", []Op{
			w("a", 0, like, none, 0, 10), w("a", 1, dislike, like, 20, 30), r("a", 0, dislike, 40, 50),
			w("a", 1, dislike, dislike, 60, 70), w("a", 0, none, dislike, 80, 90),
		}, Linearizable, nil},
		{"two writes from none, concurrent, both changed", []Op{
			w("a", 0, like, none, 0, 10), w("a", 1, dislike, none, 5, 15),
		}, Linearizable, []string{"a"}},
		{"previous from a write not yet sent", []Op{
			w("a", 0, dislike, like, 0, 10), w("a", 1, like, none, 20, 30),
		}, Linearizable, []string{"a"}},
		{"concurrent writes ordered by their previous", []Op{
			w("a", 0, dislike, like, 0, 30), w("a", 1, like, none, 5, 15),
		}, Linearizable, nil},
		{"a repeat that claims changed", []Op{
			w("a", 0, like, none, 0, 10), {Key: "a", Site: 1, Kind: Write, Action: like, Previous: like, Changed: true,
				Outcome: Applied, Call: at(20), Return: at(30)},
		}, Linearizable, []string{"a"}},
		{"only one pair fails", []Op{
			w("a", 0, like, none, 0, 10), w("b", 0, like, none, 0, 10), w("b", 1, like, none, 20, 30),
		}, Linearizable, []string{"b"}},
		{"an unknown write seen later", []Op{
			unknown("a", 0, like, 0), w("a", 1, dislike, like, 20, 30),
		}, Linearizable, nil},
		{"an unknown write never seen", []Op{
			unknown("a", 0, like, 0), w("a", 1, dislike, none, 20, 30), r("a", 0, dislike, 40, 50),
		}, Linearizable, nil},
		{"an unknown write cannot precede its call", []Op{
			w("a", 1, dislike, like, 0, 10), unknown("a", 0, like, 20),
		}, Linearizable, []string{"a"}},
		{"a write refused is left out", []Op{
			{Key: "a", Site: 0, Kind: Write, Action: like, Outcome: NotApplied, Call: at(0), Return: at(5)},
			r("a", 0, none, 10, 20),
		}, Linearizable, nil},
		{"stale read at another site: not linearizable", []Op{
			w("a", 0, like, none, 0, 10), r("a", 1, none, 20, 30),
		}, Linearizable, []string{"a"}},
		{"stale read at another site: site-monotonic", []Op{
			w("a", 0, like, none, 0, 10), r("a", 1, none, 20, 30), r("a", 1, like, 40, 50),
		}, SiteMonotonic, nil},
		{"stale read after the site's own write", []Op{
			w("a", 0, like, none, 0, 10), r("a", 0, none, 20, 30),
		}, SiteMonotonic, []string{"a"}},
		{"a site's reads go back", []Op{
			w("a", 0, like, none, 0, 10), r("a", 1, like, 20, 30), r("a", 1, none, 40, 50),
		}, SiteMonotonic, []string{"a"}},
		{"a read concurrent with the site's write may miss it", []Op{
			w("a", 0, like, none, 0, 30), r("a", 0, none, 10, 20),
		}, SiteMonotonic, nil},
		{"a read of a value never written", []Op{
			w("a", 0, like, none, 0, 10), r("a", 1, dislike, 20, 30),
		}, SiteMonotonic, []string{"a"}},
		{"a read of a value before it was written", []Op{
			r("a", 1, like, 0, 10), w("a", 0, like, none, 20, 30),
		}, SiteMonotonic, []string{"a"}},
		{"an older occurrence of the value read", []Op{
			// like, none, like through site 0; site 1 reads like, then none:
			// its first like may have been the first one.
			w("a", 0, like, none, 0, 10), w("a", 0, none, like, 20, 30), w("a", 0, like, none, 40, 50),
			r("a", 1, like, 60, 70), r("a", 1, none, 80, 90), r("a", 1, like, 100, 110),
		}, SiteMonotonic, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := Check(c.ops, c.rule, time.Minute)
			if want := map[bool]porcupine.CheckResult{true: porcupine.Ok, false: porcupine.Illegal}[c.failed == nil]; res.Result != want {
				t.Errorf("result %v, want %v", res.Result, want)
			}
			if !slices.Equal(res.Failed, c.failed) {
				t.Errorf("failed pairs %v, want %v", res.Failed, c.failed)
			}
		})
	}
}

func TestVisualize(t *testing.T) {
	res := Check([]Op{w("a", 0, like, none, 0, 10), w("a", 1, dislike, none, 5, 15), unknown("a", 1, none, 20)}, SiteMonotonic, time.Minute)
	var b bytes.Buffer
	if err := res.Visualize(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "dislike@dc2") {
		t.Errorf("the visualization does not describe the operations:\n%.500s", b.String())
	}
	if res.Ops != 3 || res.Pending != 1 {
		t.Errorf("ops %d, pending %d, want 3 and 1", res.Ops, res.Pending)
	}
}
