package region

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestIdentityInPlace: the record is padded so that the in-place rewrite
// used on a full disk always fits, and what it writes reads back.
func TestIdentityInPlace(t *testing.T) {
	dir := t.TempDir()
	id, err := LoadIdentity(dir, "", "us", time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, identityFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	long := Identity{ID: id.ID, Epoch: 1<<64 - 1}
	if err := overwriteInPlace(path, long, len(raw)); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(path)
	if err != nil || len(after) != len(raw) {
		t.Fatalf("rewritten record is %d bytes (%v), was %d", len(after), err, len(raw))
	}
	if _, err := LoadIdentity(dir, id.ID, "us", time.Unix(2, 0)); err == nil {
		t.Fatal("an epoch at the maximum was taken: it cannot grow")
	}
	mid := Identity{ID: id.ID, Epoch: 5_000_000_000_000_000_000}
	if err := overwriteInPlace(path, mid, len(raw)); err != nil {
		t.Fatal(err)
	}
	got, err := LoadIdentity(dir, "", "us", time.Unix(3, 0))
	if err != nil || got.ID != id.ID || got.Epoch != mid.Epoch+1 {
		t.Fatalf("after an in-place rewrite: %+v, %v; want %s epoch %d", got, err, id.ID, mid.Epoch+1)
	}
}
