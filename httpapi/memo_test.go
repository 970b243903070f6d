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

// TestBatchedCountsAgree holds the answers of many counts at once (the
// memo heads loaded in passes, appendCountsJSON and appendCountsProto) to
// the items encoded in full one after the other: more reads than
// memoBatch, with memos filled, empty, filled for another scope and
// holding bytes that are not an encoding (which must be encoded anew), and
// reads without a memo.
func TestBatchedCountsAgree(t *testing.T) {
	a := &api{id: apiIDs.Add(1), scopeIndex: map[string]int{engagement.GlobalScope: 0, "us": 1}}
	stored := time.Date(2026, 12, 1, 18, 0, 0, 123_456_789, time.UTC)
	info := region.ReadInfo{Now: stored.Add(1500 * time.Millisecond)}
	q := queryParams{scope: engagement.GlobalScope}
	var reads []region.CountRead
	for i := range 2*memoBatch + 5 {
		id := fmt.Sprintf("v%d", i)
		q.ids = append(q.ids, id)
		rd := region.CountRead{Rows: []engagement.Stats{{ContentID: id, Scope: engagement.GlobalScope, Likes: int64(i), Counters: map[string]int64{"view": int64(i * 3)}}}, Stored: stored, AsOf: stored, Memo: new(region.Memo)}
		switch i % 4 {
		case 0: // filled by an earlier read
			a.appendCountJSON(nil, id, &q, &rd, &info)
			a.appendCountProtoMemo(nil, id, &q, &rd, &info)
		case 1: // no memo at all
			rd.Memo = nil
		case 2: // bytes that no encoding begins or ends with
			tag, _ := a.memoTag(&rd, &q)
			rd.Memo.Store(memoJSON, tag, []byte("garbage"))
			rd.Memo.Store(memoProtobuf, tag, []byte("garbage"))
		}
		reads = append(reads, rd)
	}
	var wantJSON, wantProto []byte
	for i := range reads {
		full := reads[i]
		full.Memo = nil
		if i > 0 {
			wantJSON = append(wantJSON, ',')
		}
		wantJSON = appendCountRead(wantJSON, q.ids[i], q, &full, &info)
		wantProto = appendCountProto(wantProto, q.ids[i], q, &full, &info)
	}
	for round := range 2 { // the first fills the empty memos, the second reads them
		if got := a.appendCountsJSON(nil, &q, reads, &info); !bytes.Equal(got, wantJSON) {
			t.Errorf("round %d: JSON\n%s\nwant\n%s", round, got, wantJSON)
		}
		if got := a.appendCountsProto(nil, &q, reads, &info); !bytes.Equal(got, wantProto) {
			t.Errorf("round %d: protobuf\n%x\nwant\n%x", round, got, wantProto)
		}
	}
}

// TestStalenessAsDurationMilliseconds holds staleness to what it replaced,
// max(Now.Sub(Stored).Milliseconds(), 0), with Now carrying a monotonic
// reading as the agent's does and Stored none, at and around whole
// milliseconds, seconds and negative gaps; and to 0 when either is unknown.
func TestStalenessAsDurationMilliseconds(t *testing.T) {
	now := time.Now()
	for _, gap := range []time.Duration{0, 1, 999_999, time.Millisecond, time.Millisecond + 1, 1500 * time.Millisecond,
		time.Second - 1, time.Hour + 7, 90 * 24 * time.Hour, -1, -time.Millisecond, -time.Hour} {
		for _, shift := range []time.Duration{0, 1, 123_456_789, 999_999_999} {
			n := now.Add(shift)
			rd := region.CountRead{Stored: time.Unix(0, n.Add(-gap).UnixNano())}
			info := region.ReadInfo{Now: n}
			if got, want := staleness(&rd, &info), max(n.Sub(rd.Stored).Milliseconds(), 0); got != want {
				t.Errorf("gap %v, shift %v: staleness %d, want %d", gap, shift, got, want)
			}
		}
	}
	if got := staleness(&region.CountRead{Stored: now}, &region.ReadInfo{}); got != 0 {
		t.Errorf("staleness with no Now = %d, want 0", got)
	}
	if got := staleness(&region.CountRead{}, &region.ReadInfo{Now: now}); got != 0 {
		t.Errorf("staleness with no Stored = %d, want 0", got)
	}
}
