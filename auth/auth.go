package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
)

// Scope is a set of permissions.
type Scope uint8

// The scopes a token may hold.
const (
	Write Scope = 1 << iota
	Read
	Admin
)

// String returns the scopes' names, comma-separated.
func (s Scope) String() string {
	var names []string
	for _, sc := range []struct {
		s    Scope
		name string
	}{{Write, "write"}, {Read, "read"}, {Admin, "admin"}} {
		if s&sc.s != 0 {
			names = append(names, sc.name)
		}
	}
	return strings.Join(names, ",")
}

// ParseScopes parses "write,read,admin" (any non-empty subset). admin
// implies read.
func ParseScopes(s string) (Scope, error) {
	var out Scope
	for _, name := range strings.Split(s, ",") {
		switch name {
		case "write":
			out |= Write
		case "read":
			out |= Read
		case "admin":
			out |= Admin | Read
		default:
			return 0, fmt.Errorf("unknown scope %q (want write, read or admin)", name)
		}
	}
	return out, nil
}

// MaxTokenBytes bounds a token; MinTokenBytes keeps guessable ones out.
const (
	MinTokenBytes = 16
	MaxTokenBytes = 256
)

// Tokens is a parsed token file. Its zero value has no tokens.
type Tokens struct {
	byDigest map[[sha256.Size]byte]entry
}

type entry struct {
	digest [sha256.Size]byte
	scope  Scope
	name   string
}

// Len returns how many tokens the set holds.
func (t *Tokens) Len() int { return len(t.byDigest) }

// String describes the set without any secret.
func (t *Tokens) String() string { return fmt.Sprintf("%d tokens", t.Len()) }

// Parse reads a token file. An error names the line and never quotes a
// token.
func Parse(data []byte) (*Tokens, error) {
	t := &Tokens{byDigest: map[[sha256.Size]byte]entry{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || len(f) > 3 {
			return nil, fmt.Errorf("line %d: want TOKEN SCOPE[,SCOPE…] [NAME], got %d fields", n, len(f))
		}
		if err := checkToken(f[0]); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		scope, err := ParseScopes(f[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		e := entry{digest: sha256.Sum256([]byte(f[0])), scope: scope, name: fmt.Sprintf("line-%d", n)}
		if len(f) == 3 {
			e.name = f[2]
		}
		if _, dup := t.byDigest[e.digest]; dup {
			return nil, fmt.Errorf("line %d: the token of an earlier line again", n)
		}
		t.byDigest[e.digest] = e
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cannot read token file: %w", err)
	}
	return t, nil
}

// checkToken accepts MinTokenBytes..MaxTokenBytes of printable ASCII
// without spaces (RFC 6750's b64token is stricter; any such token works).
func checkToken(tok string) error {
	if len(tok) < MinTokenBytes || len(tok) > MaxTokenBytes {
		return fmt.Errorf("a token must be %d..%d bytes", MinTokenBytes, MaxTokenBytes)
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c > '~' {
			return errors.New("a token must be printable ASCII without spaces")
		}
	}
	return nil
}

// Errors of Check. Both are safe to show a client: they quote nothing it
// sent.
var (
	// ErrUnauthenticated: no credentials, malformed ones or an unknown
	// token (401).
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden: a known token without the scope the route needs (403).
	ErrForbidden = errors.New("forbidden")
)

// CheckError is Check's error: Err is ErrUnauthenticated or ErrForbidden,
// Reason says why without quoting the request.
type CheckError struct {
	Err    error
	Reason string
}

func (e *CheckError) Error() string { return e.Err.Error() + ": " + e.Reason }
func (e *CheckError) Unwrap() error { return e.Err }

// Status is the HTTP status of the error: 401 or 403.
func (e *CheckError) Status() int {
	if e.Err == ErrForbidden {
		return http.StatusForbidden
	}
	return http.StatusUnauthorized
}

// Check checks an Authorization header value against the set and the
// scope a route needs, and returns the token's name.
func (t *Tokens) Check(authorization string, need Scope) (string, error) {
	if authorization == "" {
		return "", &CheckError{ErrUnauthenticated, "no Authorization header"}
	}
	scheme, tok, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", &CheckError{ErrUnauthenticated, "Authorization must be \"Bearer TOKEN\""}
	}
	tok = strings.TrimLeft(tok, " ")
	if checkToken(tok) != nil {
		return "", &CheckError{ErrUnauthenticated, "malformed bearer token"}
	}
	d := sha256.Sum256([]byte(tok))
	e, found := t.byDigest[d]
	// The lookup is by digest; compare the digests in constant time too.
	if !found || subtle.ConstantTimeCompare(e.digest[:], d[:]) != 1 {
		return "", &CheckError{ErrUnauthenticated, "unknown token"}
	}
	if e.scope&need != need {
		return e.name, &CheckError{ErrForbidden, "token " + e.name + " lacks scope " + need.String()}
	}
	return e.name, nil
}

// Keeper holds the current token set of a file and reloads it.
type Keeper struct {
	path string
	cur  atomic.Pointer[Tokens]
}

// Load reads path into a new Keeper.
func Load(path string) (*Keeper, error) {
	k := &Keeper{path: path}
	if err := k.Reload(); err != nil {
		return nil, err
	}
	return k, nil
}

// Reload reads the file again; on any error the set stays as it was.
func (k *Keeper) Reload() error {
	data, err := os.ReadFile(k.path)
	if err != nil {
		return fmt.Errorf("cannot read token file: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return fmt.Errorf("token file %s: %w", k.path, err)
	}
	if t.Len() == 0 {
		return fmt.Errorf("token file %s holds no token", k.path)
	}
	k.cur.Store(t)
	return nil
}

// Tokens returns the current set.
func (k *Keeper) Tokens() *Tokens { return k.cur.Load() }

// Policy is how a listener authenticates.
type Policy struct {
	// Keeper is nil when the listener runs open.
	Keeper *Keeper
	// OpenMetrics serves /metrics without a token.
	OpenMetrics bool
}

// Open reports whether the listener takes requests without tokens.
func (p Policy) Open() bool { return p.Keeper == nil }

// Mode values of the auth setting.
const (
	ModeTokens = ""     // a token file when one is given, else open on loopback only
	ModeNone   = "none" // open, wherever it listens
)

// Decide returns the policy of a listener on listen with the token file
// tokensFile ("" for none) and mode. Without a token file a non-loopback
// listen address is refused unless mode is ModeNone.
func Decide(listen, tokensFile, mode string, openMetrics bool) (Policy, error) {
	switch mode {
	case ModeTokens, ModeNone:
	default:
		return Policy{}, fmt.Errorf("auth mode %q: want \"\" or %q", mode, ModeNone)
	}
	if tokensFile != "" {
		if mode == ModeNone {
			return Policy{}, errors.New("auth: none and a token file contradict each other")
		}
		k, err := Load(tokensFile)
		if err != nil {
			return Policy{}, err
		}
		return Policy{Keeper: k, OpenMetrics: openMetrics}, nil
	}
	if mode == ModeNone || Loopback(listen) {
		return Policy{OpenMetrics: true}, nil
	}
	return Policy{}, fmt.Errorf("listening on %s without a token file: set auth.tokens_file (--auth-tokens), or auth: none to run open on purpose", listen)
}

// Loopback reports whether the listen address host:port binds loopback
// only (127.0.0.0/8, ::1, localhost).
func Loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// RouteScope returns the scope a request needs: none for /healthz and
// /readyz, the dashboard page (GET or HEAD /: it holds no data; what it
// shows it fetches with the user's token) and /metrics when openMetrics,
// admin for /admin/… and /debug/… (the profiles: they show the process's
// memory and command line), write for POSTs under /v1/, read for every
// other request.
func RouteScope(method, path string, openMetrics bool) (Scope, bool) {
	switch {
	case path == "/healthz" || path == "/readyz":
		return 0, false
	case path == "/" && (method == http.MethodGet || method == http.MethodHead):
		return 0, false
	case path == "/metrics":
		return Read, !openMetrics
	case strings.HasPrefix(path, "/admin/"), path == "/debug", strings.HasPrefix(path, "/debug/"):
		return Admin, true
	case strings.HasPrefix(path, "/v1/") && method == http.MethodPost:
		return Write, true
	}
	return Read, true
}
