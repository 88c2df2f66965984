package warc

import (
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// surtCases are the rules of the key, one case each: the replay tools'
// (warcio.js getSurt, which ReplayWeb.page looks records up with; pywb
// agrees on these).
var surtCases = []struct{ url, want string }{
	{"http://example.com/", "com,example)/"},
	{"http://example.com", "com,example)/"},                              // the empty path is "/"
	{"https://example.com/a", "com,example)/a"},                          // the scheme is left out
	{"http://www.example.com/", "com,example)/"},                         // "www." dropped
	{"http://www2.example.com/", "com,example)/"},                        // with its digits
	{"http://wwwx.example.com/", "com,example,wwwx)/"},                   // only www and digits
	{"http://sub.www.example.com/", "com,example,www,sub)/"},             // only first
	{"http://Example.COM/Path/File.HTML", "com,example)/path/file.html"}, // lower-cased, path too
	{"http://example.com:80/", "com,example)/"},                          // default port dropped
	{"https://example.com:443/", "com,example)/"},
	{"http://example.com:8080/", "com,example:8080)/"},       // another kept
	{"https://example.com:80/", "com,example:80)/"},          // 80 is not https's
	{"http://127.0.0.1:8080/x", "1,0,0,127:8080)/x"},         // an address reversed like a name
	{"http://example.com/?b=2&a=1", "com,example)/?a=1&b=2"}, // query args sorted
	{"http://example.com/?b&a=1&a", "com,example)/?a&a=1&b"},
	{"http://example.com/p?", "com,example)/p"},           // an empty query is none
	{"http://example.com/p#frag", "com,example)/p"},       // fragment left out
	{"http://example.com/a/../b/./c", "com,example)/b/c"}, // dot segments resolved
	{"dns:example.com", "dns:example.com"},                // not http: as it is
	{"urn:x y", "urn:x%20y"},                              // a space would split the line
	{"http://exa mple.com/", "http://exa%20mple.com/"},    // unparsable: as it is
}

func TestSURT(t *testing.T) {
	for _, c := range surtCases {
		if got := SURT(c.url); got != c.want {
			t.Errorf("SURT(%q) = %q, want %q", c.url, got, c.want)
		}
	}
}

// The parser-free way gives the parser's key whenever it takes a URL.
func TestPlainSURTIsTheParsersKey(t *testing.T) {
	piece := func(options ...string) *rapid.Generator[string] { return rapid.SampledFrom(options) }
	host := rapid.Custom(func(t *rapid.T) string {
		labels := rapid.SliceOfN(piece("a", "Ex-ample", "www", "www2", "com", "0", "255", "256", "01", "0x7f", "xn--caf-dma",
			"-a", "b-", "", "a_b", "7", "co"), 1, 5).Draw(t, "labels")
		return strings.Join(labels, ".")
	})
	url := rapid.Custom(func(t *rapid.T) string {
		u := piece("http://", "https://", "HTTP://", "http:", "http:///").Draw(t, "scheme") + host.Draw(t, "host")
		u += piece("", ":80", ":443", ":8080", ":080", ":", ":65536", "@x").Draw(t, "port")
		segs := rapid.SliceOfN(piece("", "p", ".", "..", "%2e", "%2E", "%2F", "%zz", "a b", "a'b", "a\"b", "`", "{", "^",
			"~user", "file.html", "É", "x%", "a\tb", "\\", ";x=1", "@:"), 0, 4).Draw(t, "path")
		if len(segs) > 0 {
			u += "/" + strings.Join(segs, "/")
		}
		if rapid.Bool().Draw(t, "has query") {
			args := rapid.SliceOfN(piece("", "a=1", "B=2", "a", "x=/y?z", "q='", "q=%41", "c=d e", "?", "z"), 0, 4).Draw(t, "query")
			u += "?" + strings.Join(args, "&")
		}
		return u + piece("", "#", "#frag", "#a b'").Draw(t, "fragment")
	})
	var plain int
	rapid.Check(t, func(t *rapid.T) {
		u := dropWWW(url.Draw(t, "url"))
		fast, ok := plainSURT(u)
		if !ok {
			return
		}
		plain++
		slow := ""
		if parsed, err := surtParser.Parse(strings.ToLower(u)); err == nil {
			labels := strings.Split(parsed.Hostname(), ".")
			slices.Reverse(labels)
			slow = strings.Join(labels, ",")
			if parsed.Port() != "" {
				slow += ":" + parsed.Port()
			}
			slow += ")" + parsed.Pathname()
			if q := parsed.Query(); q != "" {
				args := strings.Split(q, "&")
				slices.Sort(args)
				slow += "?" + strings.Join(args, "&")
			}
		}
		if fast != slow {
			t.Fatalf("%q: plainSURT %q, the parser's way %q", u, fast, slow)
		}
	})
	if plain == 0 {
		t.Error("no generated URL was plain")
	}
}
