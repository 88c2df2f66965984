package crawl

import (
	"fmt"
	"strings"
)

// FlagsMarkdown renders the settings table as docs/flags.md: a section
// per group, a row per flag.
func FlagsMarkdown() string {
	var b strings.Builder
	b.WriteString(`# The crawl command's flags

<!-- Generated from the settings table in crawl/flags.go; do not edit.
     Regenerate with: go test ./crawl -run TestFlagsDoc -update -->

Every flag of ` + "`breakwater crawl`" + ` is either a **setting of the crawl** or belongs to
**this run**. The first run stores the crawl's settings with the crawl (in the
` + "`--db`" + ` file, or in the ` + "`--store`" + ` of a fleet); a later run uses the stored value
of every setting it does not give, and a setting it gives replaces the stored
value from then on (the run logs "crawl setting changed" with the old and new
values). ` + "`breakwater status`" + ` shows the stored settings, secret values masked.
A flag of this run applies to the run that gives it only.

A repeatable flag (` + "`--include`, `--exclude`, `--header`" + `) given again replaces the
stored list; given empty (` + "`--exclude \"\"`" + `) it clears it.
`)
	for _, g := range Groups() {
		fmt.Fprintf(&b, "\n## %s\n\n", g)
		b.WriteString("| Flag | Default | Kept | What it does |\n|---|---|---|---|\n")
		for _, f := range flagTable {
			if f.Group != g {
				continue
			}
			kept := "this run"
			if f.Stored {
				kept = "crawl"
			}
			if f.Secret != nil {
				kept += ", secret"
			}
			help := f.Help
			if f.Why != "" {
				help += ". *" + map[bool]string{true: "Stored", false: "This run only"}[f.Stored] + ": " + f.Why + ".*"
			}
			def := "–"
			if d := f.Default(); d != "" {
				def = "`" + d + "`"
			}
			fmt.Fprintf(&b, "| `--%s` %s | %s | %s | %s |\n", f.Name, f.Type(), def, kept, cell(help))
		}
	}
	return b.String()
}

// cell escapes text for a Markdown table cell.
func cell(text string) string {
	return strings.ReplaceAll(text, "|", `\|`)
}
