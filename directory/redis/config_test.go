package redis

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   []string // substrings of the error; none means valid
	}{
		{"default", func(*Config) {}, nil},
		{"custom channel", func(c *Config) { c.Channel = "directory" }, nil},
		{"empty addr", func(c *Config) { c.Addr = "" }, []string{"addr is empty"}},
		{"negative db", func(c *Config) { c.DB = -1 }, []string{"db -1"}},
		{"empty region", func(c *Config) { c.Region = "" }, []string{`region ""`}},
		{"region with a brace", func(c *Config) { c.Region = "eu}x" }, []string{`region "eu}x"`}},
		{"global is not a region", func(c *Config) { c.Region = "global" }, []string{`region "global"`}},
		{"zero default shards", func(c *Config) { c.DefaultShards = 0 }, []string{"default shards 0"}},
		{"huge default shards", func(c *Config) { c.DefaultShards = MaxShards + 1 }, []string{"default shards 65537"}},
		{"zero ping interval", func(c *Config) { c.PingInterval = 0 }, []string{"ping interval 0s"}},
		{"negative dial timeout", func(c *Config) { c.DialTimeout = -time.Second }, []string{"dial timeout -1s"}},
		{"zero queue", func(c *Config) { c.QueueSize = 0 }, []string{"queue size 0"}},
		{
			"every problem at once",
			func(c *Config) {
				*c = Config{}
			},
			[]string{"addr is empty", "region", "default shards 0", "dial timeout", "read timeout", "write timeout",
				"ping interval", "refresh interval", "queue size", "batch size", "fetchers", "max items"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.change(&cfg)
			err := cfg.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error mentioning %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to mention %q", err, w)
				}
			}
		})
	}
}

func TestKeys(t *testing.T) {
	k := newKeys("eu-west")
	if got, want := k.contentKey("v:1"), "ec:{eu-west}:content:v:1"; got != want {
		t.Errorf("contentKey = %q, want %q", got, want)
	}
	if got, want := k.counterKey("v:1", "view"), "ec:{eu-west}:counter:v:1:view"; got != want {
		t.Errorf("counterKey = %q, want %q", got, want)
	}
	if got, want := DefaultConfig().channel(), "ec:{local}:directory"; got != want {
		t.Errorf("default channel = %q, want %q", got, want)
	}
}

func TestInvalidationCodec(t *testing.T) {
	good := []struct{ content, counter string }{
		{"v1", "view"},
		{"v:1", "like_2"},
		{strings.Repeat("x", 128), "a"},
	}
	for _, g := range good {
		p := encodeInvalidation(g.content, g.counter)
		c, k, err := decodeInvalidation(p)
		if err != nil || c != g.content || k != g.counter {
			t.Errorf("decode(encode(%q, %q)) = %q, %q, %v; want the input back", g.content, g.counter, c, k, err)
		}
	}
	bad := []string{"", "view", "view ", " v1", "View v1", "view v 1", "view v/1", "16 view v1"}
	for _, p := range bad {
		if c, k, err := decodeInvalidation(p); err == nil {
			t.Errorf("decode(%q) = %q, %q, nil; want an error", p, c, k)
		}
	}
}

// FuzzDecodeInvalidation checks that any payload either fails to decode or
// decodes to a valid entry that encodes back to the same payload.
func FuzzDecodeInvalidation(f *testing.F) {
	for _, s := range []string{"view v1", "like v:2", "a b", "x", "view v 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		c, k, err := decodeInvalidation(payload)
		if err != nil {
			return
		}
		if err := checkEntry(c, k); err != nil {
			t.Fatalf("decode(%q) = %q, %q: not a valid entry: %v", payload, c, k, err)
		}
		if again := encodeInvalidation(c, k); again != payload {
			t.Fatalf("decode(%q) then encode = %q", payload, again)
		}
	})
}
