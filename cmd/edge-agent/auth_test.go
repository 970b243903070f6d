package main

import (
	"io"
	"strings"
	"testing"
)

// TestAuthRefusesAnOpenPublicListener: without a token file an agent on a
// non-loopback address is refused before it listens, unless auth: none
// says so.
func TestAuthRefusesAnOpenPublicListener(t *testing.T) {
	const public = "192.0.2.1:8080" // TEST-NET-1: never bound by this test
	_, err := loadConfig([]string{"--http", public, "--data", t.TempDir()}, func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no token file") {
		t.Fatalf("an open agent on %s = %v; want refused", public, err)
	}
	if _, err := loadConfig([]string{"--http", public, "--data", t.TempDir()},
		func(k string) string { return map[string]string{"EDGECOUNT_AUTH": "none"}[k] }, io.Discard, io.Discard); err != nil {
		t.Fatalf("auth: none on %s: %v", public, err)
	}
	if _, err := loadConfig([]string{"--http", public, "--data", t.TempDir(), "--auth-tokens", "/nonexistent"},
		func(string) string { return "" }, io.Discard, io.Discard); err != nil {
		t.Fatalf("a token file on %s: %v (the file is read at start)", public, err)
	}
}
