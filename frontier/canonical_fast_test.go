package frontier

import (
	"breakwater/store"
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// slowCanonical is the full parser's answer, which the fast path must match.
func slowCanonical(raw string) (canonical, host string, err error) {
	u, err := parseHTTP(canonParser, raw)
	if err != nil {
		return "", "", err
	}
	return canonicalOf(raw, u)
}

func checkFastCanonical(t interface {
	Fatalf(string, ...any)
}, raw string) bool {
	canonical, host, ok := fastCanonical(raw)
	if !ok {
		return false
	}
	want, wantHost, err := slowCanonical(raw)
	if err != nil {
		t.Fatalf("fastCanonical(%q) = %q, but the parser rejects it: %v", raw, canonical, err)
	}
	if canonical != want || host != wantHost {
		t.Fatalf("fastCanonical(%q) = %q, %q; the parser gives %q, %q", raw, canonical, host, want, wantHost)
	}
	return true
}

// Each piece of a generated URL is mostly plain, sometimes one of the
// forms near the edge of what the fast path takes: either way it must give
// the parser's answer or leave the URL to the parser.
type pieces struct{ plain, edge []string }

var (
	schemes  = pieces{[]string{"http://", "https://"}, []string{"HTTP://", "http:/", "http:///", "ftp://", " http://", "http:\\\\"}}
	hostsGen = pieces{[]string{"example.com", "a.b-c.d", "127.0.0.1", "255.255.255.255", "x1.y2"},
		[]string{"10.0.0.256", "1.2.3", "01.2.3.4", "0x7f.0.0.1", "Example.com", "xn--bcher-kva.example", "-a.com",
			"a-.com", "a..b", "a.com.", "a.123", "123.a", "a.0x1", "0-0", "a.0-0", "xn--a.example", "xn--.example", "a.xn--zz", "user@a.com", "[::1]", "b\u00fccher.example",
			"a_b.com", "", "a%41.com", "a\t.com"}}
	ports    = pieces{[]string{"", ":80", ":443", ":8080", ":65535"}, []string{":0", ":080", ":65536", ":", ":8a"}}
	segments = pieces{[]string{"p", "P", "...", "~x", "!$&()*+,;=:@", "", "a-b_c.d"},
		[]string{".", "..", "%2e", "%41", "a b", "a\"b", "a<b", "a`b", "a{b", "a'b", "a\\b", "\u00e9", "a|b", "a^b",
			"[x]", "a\tb", "a\nb"}}
	queries = pieces{[]string{"", "?", "?a=1", "?a=1&b=2", "?x?y", "?/p"}, []string{"?a'b", "?a b", "?a%20b", "?a\"b", "?\u00e9"}}
	frags   = pieces{[]string{"", "#", "#top", "#a#b"}, []string{"#a b", "#\u00e9", "#%zz"}}
)

func (p pieces) draw(t *rapid.T, label string) string {
	if rapid.IntRange(0, 9).Draw(t, label+" edge?") == 0 {
		return rapid.SampledFrom(p.edge).Draw(t, label)
	}
	return rapid.SampledFrom(p.plain).Draw(t, label)
}

// asSegment turns path segments into slot values: "/" and the segment,
// or nothing at all.
func (p pieces) asSegment() pieces {
	out := pieces{plain: []string{""}}
	for _, s := range p.plain {
		out.plain = append(out.plain, "/"+s)
	}
	for _, s := range p.edge {
		out.edge = append(out.edge, "/"+s)
	}
	return out
}

// combinations is every string made of one value per slot, all plain, and
// then every one with a single slot taking an edge value while the others
// take one of their first two plain values.
func combinations(slots []pieces) []string {
	var out []string
	var walk func(i int, prefix string, choices func(i int) []string)
	walk = func(i int, prefix string, choices func(i int) []string) {
		if i == len(slots) {
			out = append(out, prefix)
			return
		}
		for _, c := range choices(i) {
			walk(i+1, prefix+c, choices)
		}
	}
	walk(0, "", func(i int) []string { return slots[i].plain })
	for edge := range slots {
		walk(0, "", func(i int) []string {
			if i == edge {
				return slots[i].edge
			}
			return slots[i].plain[:min(2, len(slots[i].plain))]
		})
	}
	return out
}

func TestFastCanonicalAgreesWithParser(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var b strings.Builder
		b.WriteString(schemes.draw(t, "scheme"))
		b.WriteString(hostsGen.draw(t, "host"))
		b.WriteString(ports.draw(t, "port"))
		for range rapid.IntRange(0, 4).Draw(t, "segments") {
			b.WriteString("/")
			b.WriteString(segments.draw(t, "segment"))
		}
		b.WriteString(queries.draw(t, "query"))
		b.WriteString(frags.draw(t, "fragment"))
		checkFastCanonical(t, b.String())
	})
}

// Every URL built from plain pieces, with two path slots, and every one
// with a single edge piece swapped into a smaller such set: the same check
// as above, done exhaustively so a wrong case cannot hide behind the
// sampling.
func TestFastCanonicalExhaustive(t *testing.T) {
	slots := []pieces{schemes, hostsGen, ports, segments.asSegment(), segments.asSegment(), queries, frags}
	taken := 0
	for _, raw := range combinations(slots) {
		if checkFastCanonical(t, raw) {
			taken++
		}
	}
	if taken == 0 {
		t.Fatal("the fast path took none of the plain URLs")
	}
	t.Logf("fast path took %d URLs", taken)
}

// The fast path must take the plain URLs it exists for; otherwise it only
// costs a scan.
func TestFastCanonicalTakesPlainURLs(t *testing.T) {
	for _, raw := range []string{
		"http://127.0.0.1:41234/p/123",
		"https://example.com/",
		"https://example.com",
		"http://www.example.co.uk/a/b/c.html?x=1&y=2#frag",
		"https://example.com:443/index.html",
		"http://example.com:8080/",
	} {
		if !checkFastCanonical(t, raw) {
			t.Errorf("fastCanonical(%q) left it to the parser", raw)
		}
	}
}

func FuzzFastCanonical(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:8080/p?q=1#f", "https://a.b/c/./d", "http://a.com:80", "http://A.com/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) { checkFastCanonical(t, raw) })
}

func checkFastResolve(t interface {
	Fatalf(string, ...any)
}, base, ref string) bool {
	b, err := ParseBaseURL(base)
	if err != nil {
		return false
	}
	p, ok := fastResolve(b.plain, ref)
	if !ok {
		return false
	}
	got := Link{URL: p.href(), Host: p.host, Hash: store.HashOf(p.canonical())}
	want, err := b.parseLink(ref)
	if err != nil {
		t.Fatalf("fastResolve(%q, %q) = %+v, but the parser rejects it: %v", base, ref, got, err)
	}
	if got != want {
		t.Fatalf("fastResolve(%q, %q) = %+v; the parser gives %+v", base, ref, got, want)
	}
	return true
}

// Links: every base and reference built from the pieces above, references
// both absolute and relative in every form, must resolve as the parser
// resolves them or be left to it.
func TestFastResolveAgreesWithParser(t *testing.T) {
	bases := []string{"http://example.com/a/b?q=1#f", "https://127.0.0.1:8443/", "http://example.com",
		"http://Example.com/a/", "http://example.com/%41/", "http://example.com:80/x/y", "http://a.b-c.d/x/./y"}
	refs := combinations([]pieces{segments.asSegment(), segments.asSegment(), queries, frags})
	refs = append(refs, "//example.com/x", "//other.test/y?z", "p", "p/q", "./p", "../p", "?q=1", "?", "#f", "",
		".", "..", "/", "//", "///x", "\\p", "/\\p", " /p", "/p ", "mailto:a@b.c", "javascript:x", "HTTP://example.com/",
		"http://example.com", "https://other.test:8443/x?y#z", "http://a.com:80/p", "http:/p", "http:p")
	taken := 0
	for _, base := range bases {
		for _, ref := range refs {
			if checkFastResolve(t, base, ref) {
				taken++
			}
		}
	}
	if taken == 0 {
		t.Fatal("the fast path resolved none of the links")
	}
	t.Logf("fast path resolved %d of %d links", taken, len(bases)*len(refs))
}

func FuzzFastResolve(f *testing.F) {
	f.Add("http://example.com/a/b", "/p/2?x#y")
	f.Add("https://127.0.0.1:8443/", "http://a.test:8080/q")
	f.Add("http://example.com/a/b/c", "../../p?x#y")
	f.Add("http://example.com/a/", "./p/./q")
	f.Add("http://example.com/a/b", "../../../..?x")
	f.Add("http://example.com/", "p:q/r")
	f.Add("http://example.com/", "MailTo:a@b.c")
	f.Fuzz(func(t *testing.T, base, ref string) {
		checkFastResolve(t, base, ref)
		checkOtherScheme(t, base, ref)
	})
}

// At the length limit: a URL without a path gains a "/", which can take it
// one byte past MaxURLLength, and the parser then rejects it.
func TestFastPathsAtTheLengthLimit(t *testing.T) {
	for _, pad := range []int{-2, -1, 0, 1} {
		prefix := "http://example.com?q="
		raw := prefix + strings.Repeat("a", MaxURLLength-len(prefix)+pad)
		checkFastCanonical(t, raw)
		checkFastResolve(t, "http://example.com/a", raw)
		rooted := "/?q=" + strings.Repeat("a", MaxURLLength-len("http://example.com/?q=")+pad)
		checkFastResolve(t, "http://example.com/a", rooted)
	}
}

// checkOtherScheme holds ResolveLink's quick refusal of a reference with
// another scheme to the parser's: refused too, with the same error, or
// with the parser's own when it finds the reference malformed before it
// reads the scheme ("tttp://a.hest:808d/q": its port); the quick refusal
// names the scheme either way.
func checkOtherScheme(t interface {
	Fatalf(string, ...any)
}, base, ref string) bool {
	b, err := ParseBaseURL(base)
	if err != nil {
		return false
	}
	if _, ok := otherScheme(ref); !ok {
		return false
	}
	_, got := b.ResolveLink(ref)
	_, want := b.parseLink(ref)
	if got == nil || want == nil || !errors.Is(got, ErrUnsupportedScheme) ||
		got.Error() != want.Error() && errors.Is(want, ErrUnsupportedScheme) {
		t.Fatalf("ResolveLink(%q) against %q: error %v; the parser's %v", ref, base, got, want)
	}
	return true
}

// The links a page most often holds take neither the parser nor the
// refusal of another scheme by surprise: relative paths take the fast
// path, and other schemes are refused as the parser refuses them.
func TestFastPathsTakeCommonLinks(t *testing.T) {
	const base = "http://127.0.0.1:8080/a/b/page.html?x=1"
	for _, ref := range []string{"p", "p/q?r=s", "./p", "../p", "../../p#f", "../../../p", "p#top", "./", "../"} {
		if !checkFastResolve(t, base, ref) {
			t.Errorf("the fast path left %q to the parser", ref)
		}
	}
	for _, ref := range []string{"mailto:webmaster@bench-1.example", "javascript:void(0)", "TEL:+1-555", "data:text/plain,x", "ftp://example.com/f"} {
		if !checkOtherScheme(t, base, ref) {
			t.Errorf("%q was not refused for its scheme", ref)
		}
	}
	for _, ref := range []string{"p/./q", "p/../q", ".", "..", "..?x", "./p q", "http:p", "HTTPS:p"} {
		if checkFastResolve(t, base, ref) || checkOtherScheme(t, base, ref) {
			t.Errorf("%q was not left to the parser", ref)
		}
	}
}
