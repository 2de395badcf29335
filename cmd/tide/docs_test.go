package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docBlocks returns the fenced code blocks of a Markdown section (from its
// "## " heading to the next one) whose fence names lang.
func docBlocks(t *testing.T, doc, section, lang string) []string {
	t.Helper()
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "\n## "+section+"\n")
	if start < 0 {
		t.Fatalf("%s: no section %q", doc, section)
	}
	text = text[start+1:]
	if end := strings.Index(text[3:], "\n## "); end >= 0 {
		text = text[:end+3]
	}
	var blocks []string
	for _, part := range strings.Split(text, "```")[1:] {
		if body, ok := strings.CutPrefix(part, lang+"\n"); ok {
			blocks = append(blocks, body)
		}
	}
	return blocks
}

// TestTraceFormatExamples: every tide-csv and tide-jsonl example of
// docs/trace-formats.md runs as the page says (tide sim --trace FILE, no
// other flag), and every job in it finishes under every policy.
func TestTraceFormatExamples(t *testing.T) {
	const doc = "../../docs/trace-formats.md"
	dir := t.TempDir()
	n := 0
	for _, ex := range []struct{ lang, ext string }{{"csv", ".csv"}, {"json", ".jsonl"}} {
		for i, block := range docBlocks(t, doc, "tide-csv and tide-jsonl", ex.lang) {
			n++
			rows := len(strings.Split(strings.TrimSpace(block), "\n"))
			if ex.lang == "csv" {
				rows-- // the header
			}
			path := filepath.Join(dir, "jobs"+string(rune('0'+i))+ex.ext)
			if err := os.WriteFile(path, []byte(block), 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, errs := tide(t, "sim", "--trace", path, "--json")
			if code != 0 {
				t.Errorf("%s example %d: exit %d: %s\n%s", ex.lang, i+1, code, errs, block)
				continue
			}
			o := decode(t, out)
			if o.Jobs != rows || len(o.Policies) == 0 {
				t.Errorf("%s example %d: %d jobs, %d policies; want %d jobs", ex.lang, i+1, o.Jobs, len(o.Policies), rows)
			}
			for _, p := range o.Policies {
				if p["finished"] != float64(rows) {
					t.Errorf("%s example %d: %v finished %v of %d jobs", ex.lang, i+1, p["name"], p["finished"], rows)
				}
			}
		}
	}
	if n < 3 {
		t.Errorf("found %d examples in %s, want the two tide-csv and one tide-jsonl", n, doc)
	}
}
