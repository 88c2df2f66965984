package crawl_test

import (
	"bytes"
	"mime"
	neturl "net/url"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"breakwater/crawl"
	"breakwater/frontier"
	"breakwater/store"
)

// FuzzExtractLinksBytes feeds ExtractLinks arbitrary bytes under an
// arbitrary page URL and Content-Type, through its exported API only (the
// extractor behind it may change). It must never panic and never fail
// with a usable page URL. The title is valid UTF-8 of at most 512 runes.
// Every link is a requestable http(s) URL without a fragment whose host
// key and hash are those of its canonical form; there are no duplicates,
// at most 10,000 links and never more than the body has "=" bytes (each
// link is an attribute value, and every charset the decoder knows writes
// "=" as a 0x3D byte). A body declared as something other than HTML
// yields nothing, and the same input gives the same answer twice.
func FuzzExtractLinksBytes(f *testing.F) {
	f.Fuzz(func(t *testing.T, pageURL, contentType string, body []byte) {
		title, links, err := crawl.ExtractLinks(pageURL, contentType, body)
		if err != nil {
			if _, perr := frontier.ParseBaseURL(pageURL); perr == nil {
				t.Fatalf("ExtractLinks(%q, %q) failed with a usable page URL: %v", pageURL, contentType, err)
			}
			if title != "" || links != nil {
				t.Fatalf("an error, and a title %q and %d links too", title, len(links))
			}
			return
		}
		if n := utf8.RuneCountInString(title); n > 512 || !utf8.ValidString(title) {
			t.Fatalf("title %q: %d runes (the cap is 512), or not valid UTF-8", title, n)
		}
		if mt, _, err := mime.ParseMediaType(contentType); err == nil && mt != "text/html" && mt != "application/xhtml+xml" && len(links)+len(title) > 0 {
			t.Fatalf("Content-Type %q is not HTML, yet title %q and %d links", contentType, title, len(links))
		}
		if len(links) > 10000 {
			t.Fatalf("%d links, over the cap of 10,000", len(links))
		}
		if eq := bytes.Count(body, []byte("=")); len(links) > eq {
			t.Fatalf("%d links from a body with %d '=' bytes", len(links), eq)
		}
		seen := make(map[string]bool, len(links))
		for _, l := range links {
			checkLink(t, l)
			if seen[l.URL] {
				t.Fatalf("link %q twice", l.URL)
			}
			seen[l.URL] = true
		}
		title2, links2, err := crawl.ExtractLinks(pageURL, contentType, body)
		if err != nil || title2 != title || !slices.Equal(links2, links) {
			t.Fatalf("a second run differs: title %q -> %q, %d -> %d links, %v", title, title2, len(links), len(links2), err)
		}
	})
}

// checkLink fails unless l is what the frontier may be given: a
// requestable http(s) URL without a fragment, whose Host and Hash are the
// host key and the hash of its canonical form, as ParseLink makes them.
func checkLink(t *testing.T, l frontier.Link) {
	t.Helper()
	u, err := neturl.Parse(l.URL)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || strings.Contains(l.URL, "#") {
		t.Fatalf("link %q is not a requestable http(s) URL without a fragment (%v)", l.URL, err)
	}
	if len(l.URL) > frontier.MaxURLLength {
		t.Fatalf("link of %d bytes", len(l.URL))
	}
	canonical, err := frontier.Canonicalize(l.URL)
	if err != nil {
		t.Fatalf("link %q does not canonicalize: %v", l.URL, err)
	}
	if again, err := frontier.Canonicalize(canonical); err != nil || again != canonical {
		t.Fatalf("link %q: canonical form %q is not stable: %q, %v", l.URL, canonical, again, err)
	}
	host, err := frontier.HostKey(l.URL)
	if err != nil || l.Host != host || l.Hash != store.HashOf(canonical) {
		t.Fatalf("link %+v: host key %q (%v), canonical form %q", l, host, err, canonical)
	}
	if parsed, err := frontier.ParseLink(l.URL); err != nil || parsed != l {
		t.Fatalf("link %+v, but ParseLink of its URL gives %+v, %v", l, parsed, err)
	}
}
