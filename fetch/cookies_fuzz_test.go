package fetch

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzLoadCookiesFile loads arbitrary cookies.txt files from disk
// (FuzzLoadCookies reads them from memory and checks only that an error
// names the input). A file loads, or fails with "PATH line N: why", where
// every line before N loads (the same file cut after line N fails the
// same way and cut before it loads) or "PATH: why" for a line over the
// cap. Blank and comment lines added after the first change nothing but
// the line numbers, and a good line added at the end of a file that loads is in
// the jar.
func FuzzLoadCookiesFile(f *testing.F) {
	now := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, in string) {
		path := filepath.Join(t.TempDir(), "cookies.txt")
		if err := os.WriteFile(path, []byte(in), 0o600); err != nil {
			t.Fatal(err)
		}
		jar, err := LoadCookiesFile(path)
		if err == nil {
			if jar == nil {
				t.Fatal("no error and no jar")
			}
			for _, raw := range []string{"http://example.com/", "https://www.example.com/a/b", "http://[::1]/", "http://localhost/"} {
				u, _ := url.Parse(raw)
				jar.Cookies(u)
			}
		}
		lines := strings.SplitAfter(in, "\n")
		bad, why := badLine(t, path, err, len(lines))
		if bad > 0 {
			cut := strings.Join(lines[:bad], "")
			if _, err := LoadCookies(strings.NewReader(cut), "cut", now); err == nil || err.Error() != "cut line "+strconv.Itoa(bad)+": "+why {
				t.Fatalf("cut after line %d: %v; want line %d: %s", bad, err, bad, why)
			}
			if _, err := LoadCookies(strings.NewReader(strings.Join(lines[:bad-1], "")), "before", now); err != nil {
				t.Fatalf("the lines before the bad line %d fail: %v", bad, err)
			}
		}
		if len(in) > maxCookieLine/2 {
			return // the variations below could push a line over the cap
		}

		// A blank and a comment line after the first (or, if it is the
		// only one, a comment line after it) only move the line numbers.
		commented := lines[0] + "\n# a comment\n" + strings.Join(lines[1:], "")
		_, cerr := LoadCookies(strings.NewReader(commented), path, now)
		cbad, cwhy := badLine(t, path, cerr, len(lines)+2)
		if (cerr == nil) != (err == nil) || cwhy != why || bad > 1 && cbad != bad+2 || bad <= 1 && cbad != bad {
			t.Fatalf("with a comment after the first line: %v; without: %v", cerr, err)
		}

		// A good line at the end is in the jar of a file that loads.
		const good = "fuzz.example\tFALSE\t/\tFALSE\t0\tfuzzname\tfuzzvalue"
		jar2, gerr := LoadCookies(strings.NewReader(in+"\n"+good), path, now)
		if (gerr == nil) != (err == nil) {
			t.Fatalf("with a good line at the end: %v; without: %v", gerr, err)
		}
		if gerr == nil {
			u, _ := url.Parse("http://fuzz.example/")
			if !slices.ContainsFunc(jar2.Cookies(u), func(c *http.Cookie) bool { return c.Name == "fuzzname" && c.Value == "fuzzvalue" }) {
				t.Fatalf("the good line's cookie is not in the jar: %v", jar2.Cookies(u))
			}
		}
	})
}

var cookieLineErr = regexp.MustCompile(`^(.*) line ([0-9]+): (.*)$`)

// badLine checks err's form, "PATH line N: why" with N a line of the
// file or "PATH: why", and returns N and why (0 and "" for none, 0 and
// why for an error without a line).
func badLine(t *testing.T, path string, err error, lines int) (int, string) {
	t.Helper()
	if err == nil {
		return 0, ""
	}
	msg := err.Error()
	if m := cookieLineErr.FindStringSubmatch(msg); m != nil && m[1] == path {
		n, _ := strconv.Atoi(m[2])
		if n < 1 || n > lines || m[3] == "" {
			t.Fatalf("error %q names line %d of a file of %d", msg, n, lines)
		}
		return n, m[3]
	}
	why, ok := strings.CutPrefix(msg, path+": ")
	if !ok || !strings.Contains(why, "too long") {
		t.Fatalf("error %q names neither %s and a line, nor a line over the cap", msg, path)
	}
	return 0, why
}
