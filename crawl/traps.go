package crawl

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"breakwater/store"
)

// Crawler traps are spaces of pages a server makes up without end: a
// relative link that adds a directory each hop (/a/b/a/b/a/b/...), a
// calendar whose every month links to the next, a page whose links each
// add a parameter to its own query. --max-depth bounds every trap, but
// only after as many hops as it allows; the trap rules see the common
// shapes of one early, from the URL and its referrer alone. A URL a rule
// holds back is recorded as failed, class trap, its error naming the rule
// and its flag: it is never fetched and never silently dropped, so a
// report shows it and --retry-failed with that rule widened (or off, 0)
// fetches it. Seeds, and the requisites of a page already taken, are never
// held back.

// classTrap is the error class of a URL a trap rule held back.
const classTrap = "trap"

// TrapRules are the crawl's trap rules (--trap-...); a zero field turns
// its rule off.
type TrapRules struct {
	// Repeats holds back a URL whose path has one segment more than this
	// many times (/a/b/a/b/a/b/a with 3). Default 3.
	Repeats int
	// Segments holds back a URL whose path has more segments than this.
	// Default 30.
	Segments int
	// QueryParams holds back a URL on the same host and path as its
	// referrer whose query keeps every parameter of the referrer's and
	// adds some, once it has more parameters than this: a query that grows
	// with each hop. Default 8.
	QueryParams int
	// FutureYears holds back a URL naming a date (see urlDate) more than
	// this many years after today: a calendar that goes on for ever.
	// Default 1.
	FutureYears int
}

// Validate reports the first rule that cannot work, naming its flag.
func (r TrapRules) Validate() error {
	for _, f := range []struct {
		name  string
		value int
	}{{"--trap-repeats", r.Repeats}, {"--trap-segments", r.Segments},
		{"--trap-query-params", r.QueryParams}, {"--trap-future-years", r.FutureYears}} {
		if f.value < 0 {
			return fmt.Errorf("%s must not be negative (0 turns the rule off), got %d", f.name, f.value)
		}
	}
	return nil
}

// trapped reports whether a trap rule holds back the leased it, and which
// one, at time now. Seeds (and a seed's redirects' targets are links too)
// and requisites are never held back.
func (e *Engine) trapped(it store.Item, now time.Time) (string, bool) {
	if it.Kind == store.KindRequisite || it.Depth == 0 && it.Redirects == 0 {
		return "", false
	}
	return trapRule(it.URL, it.Referrer, e.opts.Traps, now)
}

// trapRule returns the first of rules that holds back rawURL, found on
// referrer ("" for none), at time now, as the error its result records;
// trapped is false when none does. A URL that does not parse is no trap:
// the fetch reports it.
func trapRule(rawURL, referrer string, rules TrapRules, now time.Time) (rule string, trapped bool) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", false
	}
	segments := pathSegments(u.EscapedPath())
	if rules.Segments > 0 && len(segments) > rules.Segments {
		return fmt.Sprintf("%d path segments (--trap-segments %d)", len(segments), rules.Segments), true
	}
	if rules.Repeats > 0 {
		if seg, n := mostRepeated(segments); n > rules.Repeats {
			return fmt.Sprintf("path segment %q repeated %d times (--trap-repeats %d)", seg, n, rules.Repeats), true
		}
	}
	if rules.QueryParams > 0 {
		if n, ok := grownQuery(u, referrer); ok && n > rules.QueryParams {
			return fmt.Sprintf("query grown from its referrer's to %d parameters (--trap-query-params %d)", n, rules.QueryParams), true
		}
	}
	if rules.FutureYears > 0 {
		if y, m, ok := urlDate(u, segments, now); ok && monthsAfter(y, m, now) > 12*rules.FutureYears {
			return fmt.Sprintf("date %04d-%02d more than %d years after today (--trap-future-years %d)",
				y, m, rules.FutureYears, rules.FutureYears), true
		}
	}
	return "", false
}

// pathSegments splits an escaped path into its segments: "/a//b/" is "a",
// "" and "b" (an empty segment counts; the trailing slash does not).
func pathSegments(p string) []string {
	p = strings.TrimPrefix(p, "/")
	p = strings.TrimSuffix(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// mostRepeated returns the segment that occurs most often, the first in
// the path among equals, and how often.
func mostRepeated(segments []string) (string, int) {
	counts := make(map[string]int, len(segments))
	best, most := "", 0
	for _, s := range segments {
		counts[s]++
		if counts[s] > most {
			best, most = s, counts[s]
		}
	}
	return best, most
}

// grownQuery reports whether u's query grew from its referrer's: the same
// host and path, and u's parameters (the query's "&"-separated parts, as
// written) hold every one of the referrer's, as often, and more. n is the
// number of u's parameters. Each hop of a growing query adds at least one
// parameter, so a limit on n bounds the hops a trap gets, however many
// parameters its first page had.
func grownQuery(u *url.URL, referrer string) (n int, grown bool) {
	if u.RawQuery == "" || referrer == "" {
		return 0, false
	}
	ref, err := url.Parse(referrer)
	if err != nil || !strings.EqualFold(ref.Host, u.Host) || ref.EscapedPath() != u.EscapedPath() {
		return 0, false
	}
	have := map[string]int{}
	for _, p := range queryParams(u.RawQuery) {
		have[p]++
		n++
	}
	refParams := queryParams(ref.RawQuery)
	if n <= len(refParams) {
		return n, false
	}
	for _, p := range refParams {
		if have[p] == 0 {
			return n, false
		}
		have[p]--
	}
	return n, true
}

func queryParams(raw string) []string {
	var out []string
	for _, p := range strings.Split(raw, "&") {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// maxDateYearsAhead bounds the years urlDate reads as dates: a number
// further ahead is more likely an identifier (/item/4711/03) than a year a
// calendar reached, since a calendar is held back long before.
const maxDateYearsAhead = 100

// urlDate finds the first date, to the month, in u: in its path, a
// four-digit year segment followed by a month segment (/2031/05), or one
// segment YYYY-MM or YYYY-MM-DD; in its query, a value YYYY-MM, perhaps
// followed by a day and a time, or a year parameter (year, y) with a month
// parameter (month, m) or without (January). A year more than
// maxDateYearsAhead after now is not read as one.
func urlDate(u *url.URL, segments []string, now time.Time) (year, month int, ok bool) {
	plausible := func(y, m int) bool { return m >= 1 && m <= 12 && y <= now.Year()+maxDateYearsAhead }
	for i, s := range segments {
		if y, m, ok := dashedDate(s); ok && plausible(y, m) {
			return y, m, true
		}
		if y, ok := digits(s, 4); ok && i+1 < len(segments) {
			if m, ok := monthNumber(segments[i+1]); ok && plausible(y, m) {
				return y, m, true
			}
		}
	}
	q := u.Query()
	for _, k := range []string{"year", "y"} {
		if y, ok := digits(q.Get(k), 4); ok {
			m := 1
			for _, mk := range []string{"month", "m"} {
				if v, ok := monthNumber(q.Get(mk)); ok {
					m = v
				}
			}
			if plausible(y, m) {
				return y, m, true
			}
		}
	}
	for _, p := range queryParams(u.RawQuery) {
		_, v, _ := strings.Cut(p, "=")
		v, err := url.QueryUnescape(v)
		if err != nil || len(v) < 7 {
			continue
		}
		if y, m, ok := dashedDate(v[:7]); ok && (len(v) == 7 || v[7] == '-') && plausible(y, m) {
			return y, m, true
		}
	}
	return 0, 0, false
}

// dashedDate reads YYYY-MM or YYYY-MM-DD.
func dashedDate(s string) (year, month int, ok bool) {
	if len(s) != 7 && len(s) != 10 || s[4] != '-' || len(s) == 10 && s[7] != '-' {
		return 0, 0, false
	}
	y, ok1 := digits(s[:4], 4)
	m, ok2 := digits(s[5:7], 2)
	if len(s) == 10 {
		if _, ok := digits(s[8:], 2); !ok {
			return 0, 0, false
		}
	}
	return y, m, ok1 && ok2
}

// monthNumber reads a month segment or value: 1 to 12, with or without a
// leading zero.
func monthNumber(s string) (int, bool) {
	if len(s) == 0 || len(s) > 2 {
		return 0, false
	}
	m, ok := digits(s, len(s))
	return m, ok && m >= 1 && m <= 12
}

// digits reads s as a decimal number of exactly n digits.
func digits(s string, n int) (int, bool) {
	if len(s) != n {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.Atoi(s)
	return v, err == nil
}

// monthsAfter is how many months year-month is after now's month.
func monthsAfter(year, month int, now time.Time) int {
	return (year*12 + month) - (now.Year()*12 + int(now.Month()))
}
