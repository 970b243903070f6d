package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mdLink matches a Markdown link or image target: [text](target) or
// [text](target "title").
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// TestDocLinksResolve checks that every relative link in the repository's
// Markdown files (README.md, BENCHMARKS.md, docs/, and any other tracked
// page) names a file or folder that exists in the repository, so that no
// page links outside a clone or to a note that moved.
func TestDocLinksResolve(t *testing.T) {
	root := repoRoot(t)
	var pages []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".md") {
			pages = append(pages, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 10 {
		t.Fatalf("found %d Markdown pages under %s; want the README and the docs", len(pages), root)
	}
	for _, page := range pages {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for _, m := range mdLink.FindAllStringSubmatch(stripCode(string(raw)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			abs := filepath.Join(filepath.Dir(page), target)
			if r, err := filepath.Rel(root, abs); err != nil || strings.HasPrefix(r, "..") {
				t.Errorf("%s links to %s, outside the repository", rel, m[1])
				continue
			}
			if _, err := os.Stat(abs); err != nil {
				t.Errorf("%s links to %s, which does not exist", rel, m[1])
			}
		}
	}
}

// fence matches a fenced code block; inline code is matched by tick.
var (
	fence = regexp.MustCompile("(?s)```.*?```")
	tick  = regexp.MustCompile("`[^`\n]*`")
)

// stripCode drops code blocks and inline code, whose brackets are not
// links.
func stripCode(s string) string {
	return tick.ReplaceAllString(fence.ReplaceAllString(s, ""), "")
}

// TestReadmeLayoutIsComplete checks that the README's layout map names
// every top-level folder of the repository and every command, so that a
// newcomer finds each part from it.
func TestReadmeLayoutIsComplete(t *testing.T) {
	root := repoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		for _, m := range tick.FindAllString(first, -1) {
			named[strings.TrimSuffix(strings.Trim(m, "`"), "/")] = true
		}
	}
	var want []string
	top, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range top {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && !ignoredTopDir(e.Name()) {
			want = append(want, e.Name())
		}
	}
	for _, parent := range []string{"cmd", "tools"} {
		sub, err := os.ReadDir(filepath.Join(root, parent))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range sub {
			if e.IsDir() && e.Name() != "internal" && e.Name() != "testdata" {
				want = append(want, parent+"/"+e.Name())
			}
		}
	}
	for _, dir := range want {
		if !named[dir] && !namesBelow(named, dir) {
			t.Errorf("README.md's layout map does not name %s/", dir)
		}
	}
	for dir := range named {
		if _, err := os.Stat(filepath.Join(root, dir)); err != nil {
			t.Errorf("README.md's layout map names %s/, which does not exist", dir)
		}
	}
}

// namesBelow reports whether the map names a folder inside dir (cmd/rollup
// names cmd).
func namesBelow(named map[string]bool, dir string) bool {
	for n := range named {
		if strings.HasPrefix(n, dir+"/") {
			return true
		}
	}
	return false
}

// ignoredTopDir reports the folders a working copy may hold that are not
// part of the repository (data directories of a standalone run).
func ignoredTopDir(name string) bool {
	return name == "data" || name == "data-rollup" || name == "node_modules"
}

// repoRoot is the repository's top folder (this package is e2e/).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("cannot find the repository root from e2e/: %v", err)
	}
	return root
}

// TestDocsIndexIsComplete checks that docs/README.md links every note in
// docs/, so that none is found only by listing the folder.
func TestDocsIndexIsComplete(t *testing.T) {
	root := repoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "docs", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, m := range mdLink.FindAllStringSubmatch(stripCode(string(raw)), -1) {
		target, _, _ := strings.Cut(m[1], "#")
		linked[filepath.Clean(target)] = true
	}
	notes, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range notes {
		if name := filepath.Base(n); name != "README.md" && !linked[name] {
			t.Errorf("docs/README.md does not link docs/%s", name)
		}
	}
}
