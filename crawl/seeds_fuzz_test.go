package crawl_test

import (
	"errors"
	neturl "net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"breakwater/crawl"
	"breakwater/frontier"
)

// FuzzForEachSeed reads arbitrary seed files. Every URL handed to fn is
// one the frontier takes and net/http can request, stays the same when
// NormalizeSeed reads it again, and is the NormalizeSeed reading of its
// line; or the reading fails with "NAME line N: why", where line N is the
// first seed line NormalizeSeed refuses, why is its reason, and fn has had
// every seed before it. A line naming a scheme is never read as a host.
// Blank and comment lines are skipped, so a comment line put in front
// changes nothing but the line numbers, and an error from fn stops the
// reading and is returned as it is.
func FuzzForEachSeed(f *testing.F) {
	lineErr := regexp.MustCompile(`^seeds\.txt line ([0-9]+): `)
	f.Fuzz(func(t *testing.T, in string) {
		if len(in) > 1<<20 {
			return // the scanner's line cap; TestReadSeeds covers it
		}
		var got []string
		err := crawl.ForEachSeed(strings.NewReader(in), "seeds.txt", nil, func(url string) error {
			got = append(got, url)
			return nil
		})
		for _, url := range got {
			checkSeed(t, url)
		}
		// The documented reading, line by line.
		var want []string
		bad, badErr := 0, "" // the first refused line, 1-based, and why
		for _, sl := range seedLines(in) {
			line := sl.text
			url, schemeless, nerr := crawl.NormalizeSeed(line)
			if nerr != nil {
				checkSeedError(t, line, nerr)
				bad, badErr = sl.n, nerr.Error()
				break
			}
			trimmed := strings.TrimSpace(line)
			if !schemeless && url != trimmed || schemeless && url != "http://"+strings.TrimPrefix(trimmed, "//") {
				t.Fatalf("NormalizeSeed(%q) = %q, schemeless %v", line, url, schemeless)
			}
			// A line naming a scheme ("x://" before any path) has one:
			// taken as is or refused, never read as a host name.
			if before, _, ok := strings.Cut(trimmed, "://"); schemeless && ok && !strings.ContainsAny(before, "/?#") {
				t.Fatalf("NormalizeSeed(%q) = %q: %q read as a host", line, url, before+"://")
			}
			want = append(want, url)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("ForEachSeed gave %q; the lines read one by one give %q", got, want)
		}
		if bad == 0 {
			if err != nil {
				t.Fatalf("ForEachSeed(%q): %v, but every line is a seed, blank or a comment", in, err)
			}
		} else {
			if want := "seeds.txt line " + strconv.Itoa(bad) + ": " + badErr; errString(err) != want {
				t.Fatalf("ForEachSeed(%q) error %v; want %q", in, err, want)
			}
		}
		// A comment line in front (after a byte order mark, which only
		// the first line may carry) only moves the line numbers.
		var again []string
		err2 := crawl.ForEachSeed(strings.NewReader("# seeds\n"+strings.TrimPrefix(in, "\uFEFF")), "seeds.txt", nil, func(url string) error {
			again = append(again, url)
			return nil
		})
		if !slices.Equal(again, got) || (err2 == nil) != (err == nil) {
			t.Fatalf("a comment line in front changed the reading: %q, %v -> %q, %v", got, err, again, err2)
		}
		if err2 != nil {
			if m := lineErr.FindStringSubmatch(err2.Error()); m == nil || m[1] != strconv.Itoa(bad+1) {
				t.Fatalf("with a comment line in front the error is %v; want line %d", err2, bad+1)
			}
		}
		if len(got) > 0 {
			stop := errors.New("stop")
			calls := 0
			err := crawl.ForEachSeed(strings.NewReader(in), "seeds.txt", nil, func(string) error {
				calls++
				return stop
			})
			if err != stop || calls != 1 {
				t.Fatalf("fn's error: ForEachSeed returned %v after %d calls; want fn's error after 1", err, calls)
			}
		}
	})
}

// seedLine is a line of a seeds file that is neither blank nor a comment.
type seedLine struct {
	n    int // 1-based
	text string
}

// seedLines are the seed lines of a file, as ForEachSeed's documentation
// describes them: a byte order mark dropped, trimmed, "#" starting a
// comment line and " #" a comment at the end of one.
func seedLines(in string) []seedLine {
	lines := strings.Split(in, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var out []seedLine
	for i, line := range lines {
		if i == 0 {
			line = strings.TrimPrefix(line, "\uFEFF")
		}
		line = strings.TrimSpace(line)
		if j := strings.Index(line, " #"); j >= 0 {
			line = strings.TrimSpace(line[:j])
		}
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, seedLine{i + 1, line})
		}
	}
	return out
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// checkSeed fails unless url is what a seed must be: taken by the
// frontier, requestable as written, and stable when read again.
func checkSeed(t *testing.T, url string) {
	t.Helper()
	if _, err := frontier.ParseLink(url); err != nil {
		t.Fatalf("seed %q refused by the frontier: %v", url, err)
	}
	u, err := neturl.Parse(url)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		t.Fatalf("seed %q is not a requestable http(s) URL (%v)", url, err)
	}
	again, schemeless, err := crawl.NormalizeSeed(url)
	if err != nil || again != url || schemeless {
		t.Fatalf("seed %q read again: %q, schemeless %v, %v", url, again, schemeless, err)
	}
}

// checkSeedError fails unless a refusal names the seed.
func checkSeedError(t *testing.T, line string, err error) {
	t.Helper()
	msg, trimmed := err.Error(), strings.TrimSpace(line)
	if !strings.Contains(msg, strconv.Quote(trimmed)) && !strings.Contains(msg, strconv.Quote(line)) {
		t.Fatalf("NormalizeSeed(%q) error %q does not name the seed", line, msg)
	}
}
