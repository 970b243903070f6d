package dashboard

import (
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestHandler: the page is HTML with its script and style inline, names
// the agent's region and counters, and its Content-Security-Policy allows
// exactly the inline script and style it carries (a change to either
// without the hash would leave a blank page) and nothing from elsewhere.
func TestHandler(t *testing.T) {
	h, err := Handler(Config{Region: "eu-west", TrendingCounters: []string{"view", "like"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, "/", nil))
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" {
			t.Fatalf("%s / = %d %q; want 200 text/html; charset=utf-8", method, rec.Code, rec.Header().Get("Content-Type"))
		}
		if method == http.MethodHead {
			if rec.Body.Len() != 0 {
				t.Errorf("HEAD / has a %d-byte body; want none", rec.Body.Len())
			}
			continue
		}
		body, _ := io.ReadAll(rec.Body)
		page := string(body)
		if rec.Header().Get("Content-Length") != strconv.Itoa(len(body)) {
			t.Errorf("Content-Length %q; body has %d bytes", rec.Header().Get("Content-Length"), len(body))
		}
		for _, want := range []string{`data-region="eu-west"`, `data-counters="view,like"`, `data-interval-ms="2000"`, "<title>edgecount · eu-west</title>"} {
			if !strings.Contains(page, want) {
				t.Errorf("the page lacks %s", want)
			}
		}
		if regexp.MustCompile(`(?i)(src|href)="(https?:)?//`).MatchString(page) {
			t.Errorf("the page loads something from elsewhere")
		}
		csp := rec.Header().Get("Content-Security-Policy")
		for _, tag := range []string{"script", "style"} {
			m := regexp.MustCompile(`(?s)<`+tag+`>(.*?)</`+tag+`>`).FindAllStringSubmatch(page, -1)
			if len(m) != 1 {
				t.Fatalf("the page has %d inline <%s> elements; want 1", len(m), tag)
			}
			sum := sha256.Sum256([]byte(m[0][1]))
			src := tag + "-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
			if !strings.Contains(csp, src) {
				t.Errorf("Content-Security-Policy %q does not allow the inline %s (want %s)", csp, tag, src)
			}
		}
		for _, want := range []string{"default-src 'none'", "connect-src 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("Content-Security-Policy %q lacks %s", csp, want)
			}
		}
	}
}

// TestHandlerEscapes: what the page is told of its agent is HTML-escaped.
func TestHandlerEscapes(t *testing.T) {
	h, err := Handler(Config{Region: `x"><script>alert(1)</script>`})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if strings.Contains(rec.Body.String(), "<script>alert(1)") {
		t.Fatal("the region reached the page unescaped")
	}
}
