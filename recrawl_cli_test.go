package main

import (
	"strings"
	"testing"
)

func TestRecrawlAfterFlag(t *testing.T) {
	if line := flagLine(mustRun(t, exitOK, "crawl", "--help").stdout, "recrawl-after"); line == "" {
		t.Error("crawl --help does not list --recrawl-after")
	}
	for _, bad := range []string{"500ms", "-1h"} {
		db := tempDB(t)
		r := mustRun(t, exitUsage, "crawl", "--db", db, "--recrawl-after="+bad, "http://127.0.0.1:1/")
		if !strings.Contains(r.stderr, "--recrawl-after") {
			t.Errorf("--recrawl-after %s: stderr does not name the flag:\n%s", bad, r)
		}
		if fileExists(db) {
			t.Errorf("a rejected command created %s", db)
		}
	}
}
