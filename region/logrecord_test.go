package region

import (
	"slices"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
)

func sampleRecords() [][]byte {
	in := intent{id: 42, user: "u", content: "c", region: "us", action: engagement.ActionDislike, op: opUpdate, prevFound: true,
		prev: engagement.Reaction{Action: engagement.ActionLike, Region: "eu", Version: 3, Incarnation: 9, UpdatedAt: time.Unix(5, 0)},
		next: engagement.Reaction{Action: engagement.ActionDislike, Region: "us", Version: 4, Incarnation: 9, UpdatedAt: time.Unix(6, 0)}}
	return [][]byte{
		appendIncrements(nil, "us", []Increment{{ContentID: "a", Counter: "view", Delta: 3}, {ContentID: "b", Counter: "share", Delta: 1_000_000}}),
		appendIntent(nil, &in),
		appendIntent(nil, &intent{id: 1, user: "u", content: "c", region: "us", action: engagement.ActionLike, op: opInsert,
			next: engagement.Reaction{Action: engagement.ActionLike, Region: "us", Version: 1, Incarnation: 2}}),
		appendIntent(nil, &intent{id: 3, user: "u", content: "c", region: "us", action: engagement.ActionLike, op: opInsert, named: true,
			prevWriters: []uint64{7, 1 << 60}, next: engagement.Reaction{Action: engagement.ActionLike, Region: "us", Version: 1, Incarnation: 4}}),
		appendResolution(nil, &resolution{id: 42, applied: true, content: "c", deltas: []Delta{{"like", "eu", -1}, {"dislike", "us", 1}}}),
		appendOutRecord(nil, &outRecord{covered: 17, partition: 3, id: "a/1/2/3", sums: 2, data: []byte("payload")}),
		append(appendKeyed(nil, &sampleKeys[0]), appendIncrements(nil, "us", []Increment{{ContentID: "a", Counter: "view", Delta: 3}})...),
		appendKeyed(nil, &sampleKeys[1]),
		append(appendKeyed(nil, &keyRecord{id: "\x00k3", digest: digest{9}, at: 7}), appendIntent(nil, &in)...),
		appendKeys(nil, sampleKeys),
	}
}

var sampleKeys = []keyRecord{
	{id: "tenant\x00k1", digest: digest{1, 2, 3}, at: 1e18, answered: true, ans: answer{kind: ansIncrements, accepted: 10_000}},
	{id: "\x00k2", digest: digest{4}, at: -5, answered: true, alone: true,
		ans: answer{kind: ansReaction, react: ReactResult{Previous: engagement.ActionLike, Action: engagement.ActionLike, Version: 7}}},
}

// TestKeyRecordRoundTrip: keyed records and keys-log records decode to
// what was encoded.
func TestKeyRecordRoundTrip(t *testing.T) {
	recs := sampleRecords()
	k, inner, err := decodeKeyed(recs[6])
	if err != nil || k != sampleKeys[0] || len(inner) == 0 || inner[0] != recIncrements {
		t.Fatalf("keyed increments: %+v %q %v", k, inner, err)
	}
	k, inner, err = decodeKeyed(recs[7])
	if err != nil || k != sampleKeys[1] || len(inner) != 0 {
		t.Fatalf("key alone: %+v %q %v", k, inner, err)
	}
	k, inner, err = decodeKeyed(recs[8])
	if err != nil || k.answered || k.id != "\x00k3" || len(inner) == 0 || inner[0] != recNamedIntent && inner[0] != recIntent {
		t.Fatalf("keyed intent: %+v %q %v", k, inner, err)
	}
	var got []keyRecord
	if err := decodeKeys(recs[9], func(k keyRecord) { got = append(got, k) }); err != nil || len(got) != 2 {
		t.Fatalf("keys: %+v %v", got, err)
	}
	for i := range got {
		want := sampleKeys[i]
		want.alone = false // not kept in the keys log
		if got[i] != want {
			t.Errorf("key %d = %+v, want %+v", i, got[i], want)
		}
	}
}

// TestRecordRoundTrip: every record kind decodes to what was encoded.
func TestRecordRoundTrip(t *testing.T) {
	recs := sampleRecords()
	var got []Key
	if err := decodeIncrements(recs[0], func(k Key, d int64) { got = append(got, k) }); err != nil || len(got) != 2 || got[1] != (Key{"b", "share", "us"}) {
		t.Fatalf("increments: %v %v", got, err)
	}
	in, err := decodeIntent(recs[1])
	if err != nil || in.id != 42 || in.op != opUpdate || !in.prevFound || in.prev.Version != 3 || in.next.Version != 4 ||
		in.prev.Region != "eu" || in.action != engagement.ActionDislike || !in.next.UpdatedAt.Equal(time.Unix(6, 0)) {
		t.Fatalf("intent: %+v %v", in, err)
	}
	ins, err := decodeIntent(recs[2])
	if err != nil || ins.op != opInsert || ins.prevFound || ins.next.Incarnation != 2 {
		t.Fatalf("insert intent: %+v %v", ins, err)
	}
	named, err := decodeIntent(recs[3])
	if err != nil || !named.named || named.id != 3 || !slices.Equal(named.prevWriters, []uint64{7, 1 << 60}) || ins.named {
		t.Fatalf("named insert intent: %+v %v", named, err)
	}
	rs, err := decodeResolution(recs[4])
	if err != nil || !rs.applied || len(rs.deltas) != 2 || rs.deltas[0] != (Delta{"like", "eu", -1}) {
		t.Fatalf("resolution: %+v %v", rs, err)
	}
	m, err := decodeOutRecord(recs[5])
	if err != nil || m.covered != 17 || m.partition != 3 || m.id != "a/1/2/3" || string(m.data) != "payload" || m.sums != 2 {
		t.Fatalf("outbox record: %+v %v", m, err)
	}
	// Every truncation of every record is an error, never a panic or a
	// partial apply.
	for _, r := range recs {
		for n := 0; n < len(r); n++ {
			applied := 0
			if decodeRecord(r[:n], func(Key, int64) { applied++ }) == nil {
				t.Errorf("record %q cut to %d bytes decoded", r, n)
			}
			if applied != 0 {
				t.Errorf("record %q cut to %d bytes applied %d increments", r, n, applied)
			}
		}
	}
}

// decodeRecord decodes p as whatever its kind byte says.
func decodeRecord(p []byte, fn func(Key, int64)) error {
	if len(p) == 0 {
		return errRecord
	}
	var err error
	switch p[0] {
	case recIncrements:
		err = decodeIncrements(p, fn)
	case recIntent, recNamedIntent:
		_, err = decodeIntent(p)
	case recResolution:
		_, err = decodeResolution(p)
	case recMessage:
		_, err = decodeOutRecord(p)
	case recKeyed:
		var k keyRecord
		var inner []byte
		if k, inner, err = decodeKeyed(p); err == nil && len(inner) > 0 {
			err = decodeRecord(inner, fn)
		}
		_ = k
	case recKeys:
		err = decodeKeys(p, func(keyRecord) {})
	default:
		err = errRecord
	}
	return err
}

// FuzzRecord: no payload makes a decoder panic, and a malformed
// increments record applies nothing.
func FuzzRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(r)
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		var keys []Key
		err := decodeRecord(p, func(k Key, d int64) {
			if d > MaxDelta || d < -MaxDelta {
				t.Fatalf("delta %d out of range", d)
			}
			keys = append(keys, k)
		})
		if err != nil && len(keys) > 0 {
			t.Fatalf("a malformed record applied %d increments", len(keys))
		}
	})
}
