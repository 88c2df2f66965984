package crawl

import (
	"strings"
	"testing"
	"time"
)

// The rules one at a time, each on the URLs it must hold back and the ones
// it must let through; today is 2026-12-02, a ladder of dates around it.
func TestTrapRule(t *testing.T) {
	now := time.Date(2026, time.December, 2, 17, 0, 0, 0, time.UTC)
	rules := DefaultTrapRules
	deep := "http://a.test/" + strings.Repeat("x/", 30) + "y"
	tests := []struct {
		name, url, referrer string
		rules               TrapRules
		want                string // the rule's error; "" for none
	}{
		{name: "plain page", url: "http://a.test/docs/intro?lang=en", referrer: "http://a.test/", rules: rules},
		{name: "root", url: "http://a.test/", rules: rules},

		// --trap-repeats
		{name: "segment 3 times", url: "http://a.test/a/b/a/b/a/b", rules: rules},
		{name: "segment 4 times", url: "http://a.test/a/b/a/b/a/b/a", rules: rules,
			want: `path segment "a" repeated 4 times (--trap-repeats 3)`},
		{name: "first of equals named", url: "http://a.test/b/a/b/a/b/a/b/a", rules: rules,
			want: `path segment "b" repeated 4 times (--trap-repeats 3)`},
		{name: "empty segments count", url: "http://a.test/a/////b", rules: rules,
			want: `path segment "" repeated 4 times (--trap-repeats 3)`},
		{name: "trailing slash is no segment", url: "http://a.test/x/x/x/", rules: rules},
		{name: "escaped as written", url: "http://a.test/%41/A/%41/A/%41", rules: rules},
		{name: "repeats off", url: "http://a.test/a/a/a/a/a/a", rules: TrapRules{}},
		{name: "repeats 1", url: "http://a.test/a/b/a", rules: TrapRules{Repeats: 1},
			want: `path segment "a" repeated 2 times (--trap-repeats 1)`},

		// --trap-segments
		{name: "30 segments", url: "http://a.test/" + strings.Repeat("x/", 29) + "y", rules: TrapRules{Segments: 30}},
		{name: "31 segments", url: deep, rules: TrapRules{Segments: 30}, want: "31 path segments (--trap-segments 30)"},
		{name: "segments before repeats", url: deep, rules: rules, want: "31 path segments (--trap-segments 30)"},

		// --trap-query-params
		{name: "query grows to 9", url: "http://a.test/s?a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8&i=9",
			referrer: "http://a.test/s?a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8", rules: rules,
			want: "query grown from its referrer's to 9 parameters (--trap-query-params 8)"},
		{name: "grown, in another order", url: "http://a.test/s?i=9&h=8&g=7&f=6&e=5&d=4&c=3&b=2&a=1",
			referrer: "http://a.test/s?a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8", rules: rules,
			want: "query grown from its referrer's to 9 parameters (--trap-query-params 8)"},
		{name: "a repeated parameter grows", url: "http://a.test/s?a=1&a=1&a=1", referrer: "http://a.test/s?a=1&a=1",
			rules: TrapRules{QueryParams: 2}, want: "query grown from its referrer's to 3 parameters (--trap-query-params 2)"},
		{name: "grown from no query", url: "http://a.test/s?a=1&b=2&c=3", referrer: "http://a.test/s",
			rules: TrapRules{QueryParams: 2}, want: "query grown from its referrer's to 3 parameters (--trap-query-params 2)"},
		{name: "grown to 8", url: "http://a.test/s?a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8",
			referrer: "http://a.test/s?a=1&b=2&c=3&d=4&e=5&f=6&g=7", rules: rules},
		{name: "many parameters, a value changed", url: "http://a.test/s?a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8&i=9&page=3",
			referrer: "http://a.test/s?a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8&i=9&page=2", rules: rules},
		{name: "many parameters, another path", url: "http://a.test/t?a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8&i=9",
			referrer: "http://a.test/s?a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8", rules: rules},
		{name: "many parameters, another host", url: "http://b.test/s?a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8&i=9",
			referrer: "http://a.test/s?a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8", rules: rules},
		{name: "many parameters, no referrer", url: "http://a.test/s?a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8&i=9", rules: rules},
		{name: "query rule off", url: "http://a.test/s?a=1&b=2&c=3", referrer: "http://a.test/s", rules: TrapRules{}},

		// --trap-future-years
		{name: "next month", url: "http://a.test/calendar/2027/01", rules: rules},
		{name: "a year ahead", url: "http://a.test/calendar/2027/12", rules: rules},
		{name: "a year and a month ahead", url: "http://a.test/calendar/2028/01", rules: rules,
			want: "date 2028-01 more than 1 years after today (--trap-future-years 1)"},
		{name: "month without zero", url: "http://a.test/events/2028/1/", rules: rules,
			want: "date 2028-01 more than 1 years after today (--trap-future-years 1)"},
		{name: "dashed day", url: "http://a.test/day/2030-05-17", rules: rules,
			want: "date 2030-05 more than 1 years after today (--trap-future-years 1)"},
		{name: "dashed month", url: "http://a.test/2030-05", rules: rules,
			want: "date 2030-05 more than 1 years after today (--trap-future-years 1)"},
		{name: "query date", url: "http://a.test/cal?view=day&date=2031-02-03", rules: rules,
			want: "date 2031-02 more than 1 years after today (--trap-future-years 1)"},
		{name: "query date and time", url: "http://a.test/cal?at=2031-02-03T10%3A00", rules: rules,
			want: "date 2031-02 more than 1 years after today (--trap-future-years 1)"},
		{name: "query year and month", url: "http://a.test/cal?year=2028&month=3", rules: rules,
			want: "date 2028-03 more than 1 years after today (--trap-future-years 1)"},
		{name: "query year alone", url: "http://a.test/cal?y=2029", rules: rules,
			want: "date 2029-01 more than 1 years after today (--trap-future-years 1)"},
		{name: "query year near", url: "http://a.test/cal?year=2027", rules: rules},
		{name: "the past is an archive", url: "http://a.test/blog/1998/04/", rules: rules},
		{name: "a year alone in a path", url: "http://a.test/models/2040", rules: rules},
		{name: "a year then no month", url: "http://a.test/models/2040/13", rules: rules},
		{name: "too far to be a year", url: "http://a.test/item/4711/03", rules: rules},
		{name: "a century ahead is a year", url: "http://a.test/cal/2126/12", rules: rules,
			want: "date 2126-12 more than 1 years after today (--trap-future-years 1)"},
		{name: "five digits", url: "http://a.test/cal/20300/05", rules: rules},
		{name: "not a dashed date", url: "http://a.test/2030-5-17", rules: rules},
		{name: "three years allowed", url: "http://a.test/calendar/2029/12", rules: TrapRules{FutureYears: 3}},
		{name: "three years and a month", url: "http://a.test/calendar/2030/01", rules: TrapRules{FutureYears: 3},
			want: "date 2030-01 more than 3 years after today (--trap-future-years 3)"},
		{name: "date rule off", url: "http://a.test/calendar/2099/01", rules: TrapRules{}},

		{name: "unparsable", url: "http://a.test/%zz/a/a/a/a", rules: rules},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rule, trapped := trapRule(tt.url, tt.referrer, tt.rules, now)
			if rule != tt.want || trapped != (tt.want != "") {
				t.Errorf("trapRule(%q, %q) = %q, %v; want %q", tt.url, tt.referrer, rule, trapped, tt.want)
			}
		})
	}
}

// A query that grows by one parameter a hop is held back after at most
// --trap-query-params hops, whatever the parameters of the page it
// started from.
func TestTrapRuleBoundsAGrowingQuery(t *testing.T) {
	now := time.Date(2026, time.December, 2, 0, 0, 0, 0, time.UTC)
	for start := 0; start <= 12; start++ {
		page := "http://a.test/list?"
		for i := range start {
			page += "s" + string(rune('a'+i)) + "=1&"
		}
		hops := 0
		for ; ; hops++ {
			next := page + "p" + string(rune('a'+hops)) + "=1&"
			if _, trapped := trapRule(next, page, DefaultTrapRules, now); trapped {
				break
			}
			if hops > DefaultTrapRules.QueryParams {
				t.Fatalf("from %d parameters: %d hops and not held back", start, hops)
			}
			page = next
		}
		if want := max(0, DefaultTrapRules.QueryParams-start); hops != want {
			t.Errorf("from %d parameters: held back after %d hops, want %d", start, hops, want)
		}
	}
}

func TestTrapRulesValidate(t *testing.T) {
	for _, tt := range []struct {
		rules TrapRules
		want  string
	}{
		{DefaultTrapRules, ""},
		{TrapRules{}, ""},
		{TrapRules{Repeats: -1}, "--trap-repeats"},
		{TrapRules{Segments: -1}, "--trap-segments"},
		{TrapRules{QueryParams: -2}, "--trap-query-params"},
		{TrapRules{FutureYears: -1}, "--trap-future-years"},
	} {
		err := tt.rules.Validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%+v: Validate() = %v, want an error naming %q", tt.rules, err, tt.want)
		}
	}
}
