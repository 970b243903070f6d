package httpapi

import (
	"strings"
	"testing"

	"github.com/edgecount/edgecount/region"
)

// checkFastAgrees checks that when fastIncrement accepts the object at
// s[0], the general decoder accepts it too, with the same increment and
// the same end.
func checkFastAgrees(t *testing.T, s string) (accepted bool) {
	t.Helper()
	var fast region.Increment
	next := fastIncrement(s, 0, &fast)
	if next == 0 {
		return false
	}
	d := decoder{s: s}
	slow, ok := d.increment(0)
	if !ok || d.syn != nil || d.sem != nil {
		t.Fatalf("fast path accepted %q as %+v; the decoder: ok %v, %v, %v", s, fast, ok, d.syn, d.sem)
	}
	if slow != fast || d.i != next {
		t.Fatalf("%q: fast path read %+v up to %d, the decoder %+v up to %d", s, fast, next, slow, d.i)
	}
	return true
}

func TestFastIncrement(t *testing.T) {
	id128 := strings.Repeat("x", 128)
	accept := map[string]region.Increment{
		`{"content_id":"video-00000001","counter":"view","delta":1}`:                       {ContentID: "video-00000001", Counter: "view", Delta: 1},
		`{"content_id": "c1", "counter": "view", "delta": 1}`:                              {ContentID: "c1", Counter: "view", Delta: 1}, // Python's json.dumps
		"{\n  \"delta\" : 1000000 ,\r\n\t\"counter\":\"share\",\"content_id\":\"a\"\n}":    {ContentID: "a", Counter: "share", Delta: 1000000},
		`{"counter":"watch_time_s","content_id":"` + id128 + `","delta":42}`:               {ContentID: id128, Counter: "watch_time_s", Delta: 42},
		`{"content_id":"~!#$%&'()*+,-.:;<=>?@[]^_` + "`" + `{|}","counter":"v","delta":9}`: {ContentID: "~!#$%&'()*+,-.:;<=>?@[]^_`{|}", Counter: "v", Delta: 9},
		`{"content_id":"12345678","counter":"a23456789012345678901234567890_z","delta":7}`: {ContentID: "12345678", Counter: "a23456789012345678901234567890_z", Delta: 7},
	}
	for s, want := range accept {
		var got region.Increment
		if next := fastIncrement(s, 0, &got); next != len(s) || got != want {
			t.Errorf("fastIncrement(%q) = %+v up to %d, want %+v up to %d", s, got, next, want, len(s))
		}
		checkFastAgrees(t, s)
	}
	// Everything else goes to the general decoder, valid or not: escapes,
	// rule breaks, duplicates, unknown or missing members, odd numbers.
	decline := []string{
		`{"content_id":"c\u0031","counter":"view","delta":1}`,
		`{"content_id":"c1","counter":"vi\u0065w","delta":1}`,
		`{"content\u005fid":"c1","counter":"view","delta":1}`,
		`{"content_id":"c/1","counter":"view","delta":1}`,
		`{"content_id":"video/00000001","counter":"view","delta":1}`, // in the eight-byte scan
		`{"content_id":"video-0\u00301","counter":"view","delta":1}`,
		`{"content_id":"video 00000001","counter":"view","delta":1}`,
		`{"content_id":"video` + "\x7f" + `00000001","counter":"view","delta":1}`,
		`{"content_id":"videoé00000001","counter":"view","delta":1}`,
		`{"content_id":"video` + "\t" + `00000001","counter":"view","delta":1}`,
		`{"content_id":"c 1","counter":"view","delta":1}`,
		`{"content_id":"c` + "\x7f" + `1","counter":"view","delta":1}`,
		`{"content_id":"é","counter":"view","delta":1}`,
		`{"content_id":"","counter":"view","delta":1}`,
		`{"content_id":"` + id128 + `y","counter":"view","delta":1}`,
		`{"content_id":"c1","counter":"like","delta":1}`,
		`{"content_id":"c1","counter":"dislike","delta":1}`,
		`{"content_id":"c1","counter":"View","delta":1}`,
		`{"content_id":"c1","counter":"_view","delta":1}`,
		`{"content_id":"c1","counter":"","delta":1}`,
		`{"content_id":"c1","counter":"a23456789012345678901234567890_zz","delta":1}`,
		`{"content_id":"c1","counter":"view","delta":0}`,
		`{"content_id":"c1","counter":"view","delta":01}`,
		`{"content_id":"c1","counter":"view","delta":-1}`,
		`{"content_id":"c1","counter":"view","delta":1.0}`,
		`{"content_id":"c1","counter":"view","delta":1e3}`,
		`{"content_id":"c1","counter":"view","delta":1E3}`,
		`{"content_id":"c1","counter":"view","delta":1000001}`,
		`{"content_id":"c1","counter":"view","delta":10000000}`,
		`{"content_id":"c1","counter":"view","delta":"1"}`,
		`{"content_id":1,"counter":"view","delta":1}`,
		`{"content_id":"c1","counter":null,"delta":1}`,
		`{"content_id":"c1","counter":"view"}`,
		`{"content_id":"c1","counter":"view","delta":1,"delta":1}`,
		`{"content_id":"c1","counter":"view","delta":1,"x":1}`,
		`{"content_idx":"c1","counter":"view","delta":1}`,
		`{"content_id":"c1","counter":"view","delta":1,}`,
		`{"content_id":"c1","counter":"view","delta":1`,
		`{"content_id":"c1","counter":"view","delta":1]`,
		`{"content_id":"c1" "counter":"view","delta":1}`,
		`{"content_id":"c1","counter":"view","delta":1` + "\v}",
		`{}`, `[]`, `"x"`, ``, `{`, `{"content_id`,
	}
	for _, s := range decline {
		if checkFastAgrees(t, s) {
			t.Errorf("fastIncrement(%q) accepted it; the general decoder should read it", s)
		}
	}
}

// TestDecodeIncrementsFastAndGeneral mixes objects for the fast path and
// the general decoder in one body, valid and not.
func TestDecodeIncrementsFastAndGeneral(t *testing.T) {
	body := `{"increments":[{"content_id":"a","counter":"view","delta":1},` +
		`{"content_id":"b\u002d1","counter":"view","delta":2},` +
		`{"delta":3, "counter": "share", "content_id": "c"}]}`
	incs, e := decodeIncrements(body, DefaultMaxIncrements, nil)
	want := []region.Increment{{ContentID: "a", Counter: "view", Delta: 1}, {ContentID: "b-1", Counter: "view", Delta: 2}, {ContentID: "c", Counter: "share", Delta: 3}}
	if e != nil || len(incs) != len(want) {
		t.Fatalf("decodeIncrements = %+v, %v", incs, e)
	}
	for i := range want {
		if incs[i] != want[i] {
			t.Fatalf("increments[%d] = %+v, want %+v", i, incs[i], want[i])
		}
	}
	// A bad object after plain ones is named by its index.
	bad := `{"increments":[{"content_id":"a","counter":"view","delta":1},{"content_id":"b","counter":"like","delta":1}]}`
	if _, e := decodeIncrements(bad, DefaultMaxIncrements, nil); e == nil || e.field != "increments[1].counter" {
		t.Fatalf("decodeIncrements(%s) = %+v, want an error on increments[1].counter", bad, e)
	}
}

// FuzzFastIncrement checks the fast path against the general decoder on
// any object: it may only accept what the decoder accepts, as the decoder
// reads it.
func FuzzFastIncrement(f *testing.F) {
	for _, s := range []string{
		`{"content_id":"video-00000001","counter":"view","delta":1}`,
		`{"content_id": "c1", "counter": "view", "delta": 1}`,
		`{"delta":1000000,"counter":"a_1","content_id":"~x"}`,
		`{"content_id":"c\"1","counter":"view","delta":1}`,
		`{"content_id":"c1","counter":"view","delta":1e0}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkFastAgrees(t, s)
	})
}
