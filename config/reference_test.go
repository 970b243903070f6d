package config

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the reference in docs/configuration.md from Settings")

// referenceDoc holds the configuration reference between the markers.
const (
	referenceDoc    = "../docs/configuration.md"
	referenceBegin  = "<!-- BEGIN reference: made from config.Settings by go test ./config -run TestReference -update; do not edit -->"
	referenceEnd    = "<!-- END reference -->"
	referenceRegen  = "go test ./config -run TestReference -update"
	referenceHeader = "| YAML key | type | env | flag | default | meaning |\n|---|---|---|---|---|---|\n"
)

// TestReference: the reference in docs/configuration.md is the one the
// table of settings makes; -update rewrites it.
func TestReference(t *testing.T) {
	raw, err := os.ReadFile(referenceDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	before, rest, ok := strings.Cut(doc, referenceBegin)
	_, after, ok2 := strings.Cut(rest, referenceEnd)
	if !ok || !ok2 {
		t.Fatalf("%s has no markers %q … %q", referenceDoc, referenceBegin, referenceEnd)
	}
	want := before + referenceBegin + "\n" + reference() + referenceEnd + after
	if *update {
		if err := os.WriteFile(referenceDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if doc != want {
		t.Errorf("%s: the reference differs from config.Settings; regenerate it with\n\t%s", referenceDoc, referenceRegen)
	}
}

// reference writes the settings as Markdown: a table per section of the
// YAML schema, in the order the sections first appear in Settings.
func reference() string {
	var (
		order []string
		rows  = map[string][]Setting{}
	)
	for _, s := range Settings() {
		sec, _, nested := strings.Cut(s.Key, ".")
		if !nested {
			sec = ""
		}
		if _, ok := rows[sec]; !ok {
			order = append(order, sec)
		}
		rows[sec] = append(rows[sec], s)
	}
	var b strings.Builder
	for _, sec := range order {
		title := "Top level"
		if sec != "" {
			title = "`" + sec + "`"
		}
		b.WriteString("\n### " + title + "\n\n" + referenceHeader)
		for _, s := range rows[sec] {
			cells := []string{"`" + s.Key + "`", s.Kind().String(), code(s.Env), flagCell(s), valueCell(s.Default()), text(strings.ReplaceAll(s.Meaning, "`", ""))}
			b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
		}
	}
	b.WriteString("\n")
	return b.String()
}

// flagCell names the setting's flag and the commands that have it.
func flagCell(s Setting) string {
	if s.Flag == "" {
		return ""
	}
	var cmds []string
	for _, r := range s.FlagRoles {
		cmds = append(cmds, r.String())
	}
	return "`--" + s.Flag + "` (" + strings.Join(cmds, ", ") + ")"
}

// valueCell shows a default: a value as code, a description as text.
func valueCell(v string) string {
	if strings.Contains(v, " ") {
		return text(v)
	}
	return code(v)
}

func code(v string) string {
	if v == "" {
		return ""
	}
	return "`" + strings.ReplaceAll(v, "|", `\|`) + "`"
}

// text escapes what Markdown would read as HTML or as a cell's end.
func text(v string) string {
	return strings.NewReplacer("<", "&lt;", ">", "&gt;", "|", `\|`).Replace(v)
}
