package httpapi

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/region"
)

// TestMemoAnswersAgree holds a count answer built from a state's memo
// (rowAnswers: the encoded part kept, the staleness appended per read) to
// the bytes the answer has when built in full, in JSON and protobuf, for
// every scope, for the read that fills the memo and those that reuse it,
// across staleness values of one, two and three varint bytes.
func TestMemoAnswersAgree(t *testing.T) {
	a := &api{id: apiIDs.Add(1), scopeIndex: map[string]int{engagement.GlobalScope: 0, "us": 1, "eu": 2}}
	stored := time.Date(2026, 12, 1, 18, 0, 0, 123_456_789, time.UTC)
	updated := stored.Add(-time.Minute)
	states := map[string][]engagement.Stats{
		"no rows":     nil,
		"global only": {{ContentID: "v1", Scope: engagement.GlobalScope, Likes: 3, Dislikes: 1, UpdatedAt: updated}},
		"counters": {
			{ContentID: "v1", Scope: engagement.GlobalScope, Likes: 1 << 40, Counters: map[string]int64{"view": 9, "share": 2, "a\"b": -1}, UpdatedAt: updated},
			{ContentID: "v1", Scope: "us", Likes: 1, Counters: map[string]int64{"view": 5}},
		},
	}
	for name, rows := range states {
		for _, scope := range []string{engagement.GlobalScope, "us", "eu"} {
			t.Run(fmt.Sprintf("%s/%s", name, scope), func(t *testing.T) {
				memo := new(region.Memo)
				q := queryParams{scope: scope}
				for _, ms := range []int64{0, 1, 127, 128, 16383, 16384, 3_000_000} {
					info := region.ReadInfo{Now: stored.Add(time.Duration(ms)*time.Millisecond + 400*time.Microsecond)}
					full := region.CountRead{Rows: rows, Stored: stored, AsOf: stored}
					kept := full
					kept.Memo = memo
					// The memo path appends after what dst holds.
					prefix := []byte(`{"counts":[`)
					if want, got := appendCountRead(slices.Clone(prefix), "v1", q, &full, &info), a.appendCountJSON(slices.Clone(prefix), "v1", &q, &kept, &info); !bytes.Equal(got, want) {
						t.Errorf("staleness %d ms: JSON from the memo\n%s\nwant\n%s", ms, got, want)
					}
					if want, got := appendCountProto(slices.Clone(prefix), "v1", q, &full, &info), a.appendCountProtoMemo(slices.Clone(prefix), "v1", &q, &kept, &info); !bytes.Equal(got, want) {
						t.Errorf("staleness %d ms: protobuf from the memo\n%x\nwant\n%x", ms, got, want)
					}
				}
				tag, _ := a.memoTag(&region.CountRead{Stored: stored, AsOf: stored, Memo: memo}, &q)
				if _, ok := memo.Load(memoJSON, tag); !ok {
					t.Fatal("the memo kept no JSON answer")
				}
				if _, ok := memo.Load(memoProtobuf, tag); !ok {
					t.Fatal("the memo kept no protobuf answer")
				}
			})
		}
	}
	// A memo another handler filled is not taken for this one's; a fresh
	// read and a read without a store time are answered in full.
	other := &api{id: apiIDs.Add(1), scopeIndex: map[string]int{engagement.GlobalScope: 0, "eu": 1, "us": 2}}
	memo := new(region.Memo)
	rd := region.CountRead{Rows: states["counters"], Stored: stored, AsOf: stored, Memo: memo}
	info := region.ReadInfo{Now: stored}
	us := queryParams{scope: "us"}
	other.appendCountJSON(nil, "v1", &queryParams{scope: "eu"}, &rd, &info)
	if got, want := a.appendCountJSON(nil, "v1", &us, &rd, &info), appendCountRead(nil, "v1", us, &rd, &info); !bytes.Equal(got, want) {
		t.Errorf("after another handler's read: %s, want %s", got, want)
	}
	if _, ok := a.memoTag(&rd, &queryParams{scope: "us", mode: region.Fresh}); ok {
		t.Error("a fresh read has a memo tag")
	}
	if _, ok := a.memoTag(&region.CountRead{Rows: rd.Rows, Memo: new(region.Memo)}, &us); ok {
		t.Error("a read without a store time has a memo tag")
	}
}
