package gossip

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
)

func TestMetaRoundTrip(t *testing.T) {
	for _, m := range []Meta{
		{Region: "us-east", AgentID: "us-east-host1"},
		{Region: "ap-south", AgentID: "a", HTTPAddr: "10.0.0.1:8080", Version: "v1.0.0+dirty", Keys: []string{"0a1b2c3d", "ffffffff"}},
		{
			Region: strings.Repeat("r", 64), AgentID: strings.Repeat("a", 128), HTTPAddr: strings.Repeat("h", maxHTTPAddrLen),
			Version: strings.Repeat("v", maxVersionLen), Keys: []string{"00000000", "11111111", "22222222", "33333333", "44444444", "55555555", "66666666", "77777777"},
		},
	} {
		b, err := encodeMeta(m)
		if err != nil {
			t.Fatalf("encodeMeta(%+v): %v", m, err)
		}
		if len(b) > memberlist.MetaMaxSize {
			t.Errorf("encoded meta is %d bytes, over memberlist's %d", len(b), memberlist.MetaMaxSize)
		}
		got, err := decodeMeta(b)
		if err != nil {
			t.Fatalf("decodeMeta(encodeMeta(%+v)): %v", m, err)
		}
		if got.Region != m.Region || got.AgentID != m.AgentID || got.HTTPAddr != m.HTTPAddr || got.Version != m.Version || strings.Join(got.Keys, ",") != strings.Join(m.Keys, ",") {
			t.Errorf("round trip = %+v, want %+v", got, m)
		}
	}
}

func TestMetaRejects(t *testing.T) {
	good, err := encodeMeta(Meta{Region: "us-east", AgentID: "a1", HTTPAddr: "h:1", Version: "v1", Keys: []string{"01020304"}})
	if err != nil {
		t.Fatal(err)
	}
	withVersion := func(v byte, extra ...byte) []byte {
		b := append([]byte{v}, good[1:]...)
		return append(b, extra...)
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"version 0", withVersion(0)},
		{"trailing bytes in version 1", withVersion(1, 0)},
		{"truncated", good[:len(good)-1]},
		{"truncated field", good[:5]},
		{"bad region", []byte("\x01\x07US EAST\x02a1\x00\x00\x00")},
		{"empty agent", []byte("\x01\x07us-east\x00\x00\x00\x00")},
		{"agent with slash", []byte("\x01\x07us-east\x03a/b\x00\x00\x00")},
		{"http with space", []byte("\x01\x07us-east\x02a1\x03h 1\x00\x00")},
		{"too many keys", append([]byte("\x01\x07us-east\x02a1\x00\x00\x09"), make([]byte, 36)...)},
		{"short key list", []byte("\x01\x07us-east\x02a1\x00\x00\x01\x01\x02")},
		{"over 512 bytes", append(withVersion(2), make([]byte, 600)...)},
	} {
		if m, err := decodeMeta(tc.b); err == nil || !errors.Is(err, errMeta) {
			t.Errorf("%s: decodeMeta = %+v, %v; want errMeta", tc.name, m, err)
		}
	}
	// A later version may append fields.
	if _, err := decodeMeta(withVersion(2, 1, 2, 3)); err != nil {
		t.Errorf("version 2 with an appended field: %v, want accepted", err)
	}
	for _, m := range []Meta{
		{Region: "global", AgentID: "a"},
		{Region: "us-east", AgentID: "a", Keys: []string{"XYZ"}},
		{Region: "us-east", AgentID: "a", HTTPAddr: strings.Repeat("h", maxHTTPAddrLen+1)},
	} {
		if _, err := encodeMeta(m); err == nil {
			t.Errorf("encodeMeta(%+v) succeeded, want an error", m)
		}
	}
}

func TestMessageRoundTrip(t *testing.T) {
	es := []entry{
		{Origin: "us-east-1", Key: "like", Version: 1, Millis: 1700000000000, Data: []byte("summary")},
		{Origin: "us-east-2", Key: "trending/view/5m", Version: 1<<63 + 5, Millis: 0, Data: nil},
		{Origin: "n", Key: "k", Version: 300, Millis: 1, Data: bytes.Repeat([]byte{0xff}, 1000)},
	}
	b := encodeEntries(nil, es)
	m, err := decodeMessage(b, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if m.kind != kindEntries || len(m.entries) != len(es) {
		t.Fatalf("decoded kind %d with %d entries, want %d", m.kind, len(m.entries), len(es))
	}
	for i, e := range m.entries {
		w := es[i]
		if e.Origin != w.Origin || e.Key != w.Key || e.Version != w.Version || e.Millis != w.Millis || !bytes.Equal(e.Data, w.Data) {
			t.Errorf("entry %d = %+v, want %+v", i, e, w)
		}
		if entrySize(&w) != len(appendEntry(nil, &w)) {
			t.Errorf("entrySize(%d) = %d, encoded %d", i, entrySize(&w), len(appendEntry(nil, &w)))
		}
	}
	b[len(b)-1] ^= 1 // decoded values are copies
	if m.entries[2].Data[999] != 0xff {
		t.Error("decoded data aliases the input buffer")
	}
	l, err := decodeMessage(encodeLeave("us-east-1"), 10)
	if err != nil || l.kind != kindLeave || l.leaving != "us-east-1" {
		t.Errorf("leave round trip = %+v, %v", l, err)
	}
}

func TestMessageRejects(t *testing.T) {
	one := func(e entry) []byte { return encodeEntries(nil, []entry{e}) }
	ok := entry{Origin: "a", Key: "k", Version: 1, Millis: 1, Data: []byte("xyz")}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, errMalformed},
		{"version 2", append([]byte{2}, one(ok)[1:]...), errMalformed},
		{"kind 9", []byte{1, 9, 0}, errMalformed},
		{"no count", []byte{1, 1}, errMalformed},
		{"count beyond bytes", []byte{1, 1, 50, 1, 'a', 1, 'k', 1, 1, 0}, errMalformed},
		{"count beyond limit", append([]byte{1, 1, 0x81, 0x80, 0x04}, make([]byte, 1<<20)...), errOversized},
		{"non-minimal varint", []byte{1, 1, 0x81, 0x00, 1, 'a', 1, 'k', 1, 1, 0}, errMalformed},
		{"trailing byte", append(one(ok), 0), errMalformed},
		{"truncated data", one(ok)[:len(one(ok))-1], errMalformed},
		{"value over limit", one(entry{Origin: "a", Key: "k", Version: 1, Data: make([]byte, 11)}), errOversized},
		{"version 0", one(entry{Origin: "a", Key: "k", Version: 0}), errMalformed},
		{"empty key", one(entry{Origin: "a", Key: "", Version: 1}), errMalformed},
		{"key with space", one(entry{Origin: "a", Key: "a b", Version: 1}), errMalformed},
		{"key too long", one(entry{Origin: "a", Key: strings.Repeat("k", 65), Version: 1}), errMalformed},
		{"origin with slash", one(entry{Origin: "a/b", Key: "k", Version: 1}), errMalformed},
		{"origin too long", one(entry{Origin: strings.Repeat("o", 129), Key: "k", Version: 1}), errMalformed},
		{"time out of range", one(entry{Origin: "a", Key: "k", Version: 1, Millis: -1}), errMalformed},
		{"leave without name", []byte{1, 2, 0}, errMalformed},
		{"leave with trailing byte", append(encodeLeave("a"), 'x'), errMalformed},
	} {
		m, err := decodeMessage(tc.b, 10)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: decodeMessage = %+v, %v; want %v", tc.name, m, err, tc.want)
		}
	}
}

func TestParseKeys(t *testing.T) {
	k16, k24, k32 := "AAECAwQFBgcICQoLDA0ODw==", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYX", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	for _, tc := range []struct {
		name  string
		file  string
		sizes []int // key sizes, primary first; nil: an error
	}{
		{"one key", k32 + "\n", []int{32}},
		{"comments, blanks, spaces, no final newline", "# primary\n\n  " + k16 + "  \n# old\n" + k24, []int{16, 24}},
		{"crlf", k24 + "\r\n" + k32 + "\r\n", []int{24, 32}},
		{"empty", "", nil},
		{"only comments", "# nothing\n", nil},
		{"not base64", "not-base64!\n", nil},
		{"unpadded", strings.TrimRight(k32, "="), nil},
		{"8 bytes", "AAECAwQFBgc=\n", nil},
		{"duplicate", k16 + "\n" + k16 + "\n", nil},
		{"nine keys", strings.Repeat(k16+"\n", 1) + func() string {
			var b strings.Builder
			for i := 0; i < 8; i++ {
				b.WriteString(strings.Replace(k32, "A", string(rune('B'+i)), 1) + "\n")
			}
			return b.String()
		}(), nil},
		{"huge", strings.Repeat("#", maxKeyFileBytes+1), nil},
	} {
		keys, err := parseKeys(strings.NewReader(tc.file))
		if tc.sizes == nil {
			if err == nil {
				t.Errorf("%s: parsed %d keys, want an error", tc.name, len(keys))
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var sizes []int
		for _, k := range keys {
			sizes = append(sizes, len(k))
		}
		if !equalInts(sizes, tc.sizes) {
			t.Errorf("%s: key sizes %v, want %v", tc.name, sizes, tc.sizes)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestReconcileKeyring(t *testing.T) {
	key := func(c byte) []byte { return bytes.Repeat([]byte{c}, 16) }
	p, q, r, s := key('p'), key('q'), key('r'), key('s')
	for _, tc := range []struct {
		name      string
		installed [][]byte // primary first
		file      [][]byte
	}{
		{"unchanged", [][]byte{p}, [][]byte{p}},
		{"add", [][]byte{p}, [][]byte{p, q}},
		{"switch primary", [][]byte{p, q}, [][]byte{q, p}},
		{"remove last", [][]byte{q, p}, [][]byte{q}},
		{"remove middle, keep later", [][]byte{p, r, s}, [][]byte{p, s}},
		{"replace everything", [][]byte{p, q}, [][]byte{r, s}},
	} {
		kr, err := memberlist.NewKeyring(tc.installed[1:], tc.installed[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := reconcileKeyring(kr, tc.file); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := kr.GetKeys()
		if len(got) != len(tc.file) || !bytes.Equal(got[0], tc.file[0]) {
			t.Errorf("%s: keyring %q, want %q with the first primary", tc.name, got, tc.file)
			continue
		}
		for _, k := range tc.file {
			if !containsKey(got, k) {
				t.Errorf("%s: keyring %q lacks %q", tc.name, got, k)
			}
		}
	}
}

func containsKey(keys [][]byte, k []byte) bool {
	for _, x := range keys {
		if bytes.Equal(x, k) {
			return true
		}
	}
	return false
}

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig("us-east", "agent-1")
	good.KeyFile = "/etc/edgecount/gossip.keys"
	if err := good.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"region", func(c *Config) { c.Region = "US" }, "region"},
		{"agent", func(c *Config) { c.AgentID = "" }, "agent id"},
		{"node name", func(c *Config) { c.NodeName = "a b" }, "node name"},
		{"bind", func(c *Config) { c.BindAddr = "localhost" }, "bind addr"},
		{"advertise", func(c *Config) { c.AdvertiseAddr = "x" }, "advertise addr"},
		{"port", func(c *Config) { c.BindPort = 70000 }, "bind port"},
		{"seed", func(c *Config) { c.Seeds = []string{"10.0.0.1"} }, "seeds[0]"},
		{"plaintext", func(c *Config) { c.KeyFile = "" }, "key file"},
		{"profile", func(c *Config) { c.Profile = "turbo" }, "profile"},
		{"value limit", func(c *Config) { c.MaxValueBytes = MaxValueLimit + 1 }, "max value bytes"},
		{"keys", func(c *Config) { c.MaxKeys = 0 }, "max keys"},
		{"http", func(c *Config) { c.HTTPAddr = "a b" }, "http addr"},
	} {
		c := good
		tc.change(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
	plain := good
	plain.KeyFile, plain.AllowPlaintext = "", true
	if err := plain.Validate(); err != nil {
		t.Errorf("plaintext allowed: %v", err)
	}
}
