package apijson

import (
	"encoding/json"
	"testing"
)

// Seed corpora live in testdata/fuzz/<FuzzName>/. Run a fuzzer with e.g.
//
//	go test ./internal/apijson -run '^$' -fuzz '^FuzzAppendString$' -fuzztime 30s

// FuzzAppendString checks the JSON string encoder against encoding/json.
func FuzzAppendString(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		out := AppendString(nil, s)
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("AppendString(%q) = %s, not a JSON string: %v", s, out, err)
		}
		std, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var want string
		if err := json.Unmarshal(std, &want); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("AppendString(%q) reads back as %q, encoding/json's as %q", s, got, want)
		}
	})
}
