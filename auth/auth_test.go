package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	writer  = "w-0123456789abcdef"
	reader  = "r-0123456789abcdef"
	admin   = "a-0123456789abcdef"
	canary  = "CANARY-SECRET-7f3a9c"
	fileTxt = "# tokens\n" + writer + " write loadbalancer\n\n" + reader + " read\n" + admin + " admin,write ops\n"
)

func TestCheck(t *testing.T) {
	toks, err := Parse([]byte(fileTxt))
	if err != nil || toks.Len() != 3 {
		t.Fatalf("Parse = %v, %v", toks, err)
	}
	tests := []struct {
		header string
		need   Scope
		name   string
		err    error
	}{
		{"Bearer " + writer, Write, "loadbalancer", nil},
		{"bearer " + writer, Write, "loadbalancer", nil}, // the scheme is case-insensitive
		{"Bearer " + writer, Read, "loadbalancer", ErrForbidden},
		{"Bearer " + reader, Read, "line-4", nil},
		{"Bearer " + reader, Write, "line-4", ErrForbidden},
		{"Bearer " + admin, Read, "ops", nil}, // admin implies read
		{"Bearer " + admin, Admin, "ops", nil},
		{"Bearer " + reader, Admin, "line-4", ErrForbidden},
		{"", Read, "", ErrUnauthenticated},
		{"Basic " + writer, Write, "", ErrUnauthenticated},
		{"Bearer", Write, "", ErrUnauthenticated},
		{"Bearer short", Write, "", ErrUnauthenticated},
		{"Bearer " + writer + "x", Write, "", ErrUnauthenticated},
		{"Bearer " + canary + "-unknown-token", Write, "", ErrUnauthenticated},
		{"Bearer " + writer + "\x00", Write, "", ErrUnauthenticated},
	}
	for _, tt := range tests {
		name, err := toks.Check(tt.header, tt.need)
		if !errors.Is(err, tt.err) || (tt.err != ErrUnauthenticated && name != tt.name) {
			t.Errorf("Check(%q, %v) = %q, %v; want %q, %v", tt.header, tt.need, name, err, tt.name, tt.err)
		}
		var ce *CheckError
		if err != nil {
			if !errors.As(err, &ce) || (ce.Status() != 401 && ce.Status() != 403) {
				t.Errorf("Check(%q): error %v is no CheckError with 401/403", tt.header, err)
			}
			if strings.Contains(err.Error(), canary) || strings.Contains(err.Error(), writer) {
				t.Errorf("Check(%q): error %q quotes the token", tt.header, err)
			}
		}
	}
}

func TestParseRejectsWithoutQuotingTokens(t *testing.T) {
	for _, bad := range []string{
		canary + "xxxxxxxxxxxx",                 // no scope
		canary + "xxxxxxxxxxxx reed",            // unknown scope
		canary + "xxxxxxxxxxxx read name extra", // too many fields
		"CANARY read",                           // too short
		canary + "xxxxxxxxxxxx read\n" + canary + "xxxxxxxxxxxx write", // twice
		canary + strings.Repeat("x", MaxTokenBytes) + " read",
	} {
		_, err := Parse([]byte(bad))
		if err == nil {
			t.Errorf("Parse(%q) accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), "CANARY") {
			t.Errorf("Parse error %q quotes the token", err)
		}
	}
}

func TestKeeperReloadKeepsTheOldSetOnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(fileTxt), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Tokens().Check("Bearer "+writer, Write); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"garbage", "# only comments\n"} {
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := k.Reload(); err == nil {
			t.Fatalf("Reload of %q succeeded", bad)
		}
		if _, err := k.Tokens().Check("Bearer "+writer, Write); err != nil {
			t.Fatalf("after a refused reload: %v; want the old set", err)
		}
	}
	if err := os.WriteFile(path, []byte(reader+" read\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := k.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Tokens().Check("Bearer "+writer, Write); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("removed token: %v; want ErrUnauthenticated", err)
	}
}

func TestDecide(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(fileTxt), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		listen, file, mode string
		open, fails        bool
	}{
		{"127.0.0.1:8080", "", "", true, false},
		{"[::1]:8080", "", "", true, false},
		{"localhost:8080", "", "", true, false},
		{"0.0.0.0:8080", "", "", false, true},
		{":8080", "", "", false, true},
		{"10.1.2.3:8080", "", "none", true, false},
		{"0.0.0.0:8080", path, "", false, false},
		{"127.0.0.1:8080", path, "", false, false},
		{"127.0.0.1:8080", path, "none", false, true},
		{"127.0.0.1:8080", "", "open", false, true},
		{"127.0.0.1:8080", path + ".missing", "", false, true},
	}
	for _, tt := range tests {
		p, err := Decide(tt.listen, tt.file, tt.mode, false)
		if (err != nil) != tt.fails || (err == nil && p.Open() != tt.open) {
			t.Errorf("Decide(%q, %q, %q) = open %v, %v; want open %v, fails %v", tt.listen, tt.file, tt.mode, p.Open(), err, tt.open, tt.fails)
		}
	}
}

func TestRouteScope(t *testing.T) {
	tests := []struct {
		method, path string
		open         bool
		scope        Scope
		need         bool
	}{
		{"GET", "/healthz", false, 0, false},
		{"GET", "/readyz", false, 0, false},
		{"GET", "/metrics", false, Read, true},
		{"GET", "/metrics", true, Read, false},
		{"POST", "/v1/increments", false, Write, true},
		{"POST", "/v1/reactions", false, Write, true},
		{"GET", "/v1/counts/a", false, Read, true},
		{"POST", "/admin/recount", false, Admin, true},
		{"GET", "/admin/recount", false, Admin, true},
		{"GET", "/debug/pprof/", false, Admin, true},
		{"GET", "/debug/pprof/heap", true, Admin, true},
		{"GET", "/debug/pprof", false, Admin, true},
		{"GET", "/debug", false, Admin, true},
		{"GET", "/debugger", false, Read, true},
		{"GET", "/", false, 0, false},
		{"HEAD", "/", false, 0, false},
		{"POST", "/", false, Read, true},
		{"GET", "/x", false, Read, true},
	}
	for _, tt := range tests {
		s, need := RouteScope(tt.method, tt.path, tt.open)
		if s != tt.scope || need != tt.need {
			t.Errorf("RouteScope(%s %s, open %v) = %v, %v; want %v, %v", tt.method, tt.path, tt.open, s, need, tt.scope, tt.need)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(fileTxt))
	f.Add([]byte("x y z w\n#\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		toks, err := Parse(data)
		if err != nil {
			return
		}
		// Every token of an accepted file checks with its own scopes.
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			scope, _ := ParseScopes(f[1])
			if _, err := toks.Check("Bearer "+f[0], scope); err != nil {
				t.Fatalf("token of line %q: %v", line, err)
			}
		}
	})
}

func FuzzCheck(f *testing.F) {
	toks, err := Parse([]byte(fileTxt))
	if err != nil {
		f.Fatal(err)
	}
	f.Add("Bearer " + writer)
	f.Add("Bearer  " + reader)
	f.Add("bEaReR x")
	f.Add("")
	f.Fuzz(func(t *testing.T, header string) {
		name, err := toks.Check(header, Read)
		if err == nil && name == "" {
			t.Fatalf("Check(%q) passed without a name", header)
		}
		if err == nil && !strings.Contains(header, reader) && !strings.Contains(header, admin) {
			t.Fatalf("Check(%q) passed for read without a read token", header)
		}
	})
}
