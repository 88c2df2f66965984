package warc

import "testing"

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
