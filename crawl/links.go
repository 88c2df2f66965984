package crawl

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html/charset"

	"breakwater/frontier"
)

const (
	// maxTitleRunes caps the stored page title.
	maxTitleRunes = 512
	// maxLinksPerPage caps the links taken from one page, so a generated
	// page of a million links cannot flood the frontier.
	maxLinksPerPage = 10000
)

// ExtractLinks returns the title and the outgoing links of an HTML page.
// Bodies that are not HTML (by contentType, or sniffed when it is empty)
// yield nothing and no error. The body is decoded from its declared or
// sniffed charset first. Links come from <a href> and <area href>, resolved
// against <base href> when present, else against pageURL; their URLs are
// absolute http(s) URLs in their original (not canonical) form, without
// fragments, de-duplicated in document order and capped at 10,000. Each
// link is parsed once, for its URL, host key and dedupe hash together.
// Malformed HTML is parsed the way a browser would; it is never an error.
func ExtractLinks(pageURL, contentType string, body []byte) (title string, links []frontier.Link, err error) {
	mediaType := htmlMediaType(contentType, body)
	if mediaType == "" || len(body) == 0 {
		return "", nil, nil
	}
	page, err := frontier.ParseBaseURL(pageURL)
	if err != nil {
		return "", nil, fmt.Errorf("extract links: page url: %w", err)
	}
	if strings.TrimSpace(contentType) == "" {
		// The sniffed type carries no charset: leave that to the meta prescan.
		contentType = mediaType
	}
	doc, err := goquery.NewDocumentFromReader(decodedReader(body, contentType))
	if err != nil {
		return "", nil, fmt.Errorf("extract links from %s: parse: %w", pageURL, err)
	}
	return pageTitle(doc), collectLinks(doc, documentBase(doc, page)), nil
}

// htmlMediaType returns "text/html" or "application/xhtml+xml" when the
// declared (or, if none, sniffed) type is HTML, else "".
func htmlMediaType(contentType string, body []byte) string {
	if strings.TrimSpace(contentType) == "" {
		contentType = http.DetectContentType(body)
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		// Servers send junk parameters; the type before ";" is what counts.
		mt, _, _ = strings.Cut(contentType, ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
	}
	if mt == "text/html" || mt == "application/xhtml+xml" {
		return mt
	}
	return ""
}

// decodedReader converts body to UTF-8 from the charset named by the
// Content-Type, a BOM or a <meta> tag. An undecodable body is read as is.
func decodedReader(body []byte, contentType string) io.Reader {
	if utf8.Valid(body) && declaresUTF8(contentType) {
		return bytes.NewReader(body) // already what the parser wants
	}
	r, err := charset.NewReader(bytes.NewReader(body), contentType)
	if err != nil {
		return bytes.NewReader(body)
	}
	return r
}

// declaresUTF8 reports whether the Content-Type names UTF-8 as the charset.
// The server's charset outranks a <meta> tag; only a BOM outranks it, and a
// UTF-16 BOM is not valid UTF-8, so such a body still takes the slow path.
func declaresUTF8(contentType string) bool {
	_, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	cs := strings.ToLower(params["charset"])
	return cs == "utf-8" || cs == "utf8"
}

// pageTitle is the first HTML <title> (not an SVG one), whitespace collapsed.
func pageTitle(doc *goquery.Document) string {
	var title string
	doc.Find("title").EachWithBreak(func(_ int, s *goquery.Selection) bool {
		if s.Nodes[0].Namespace != "" {
			return true
		}
		title = strings.Join(strings.Fields(s.Text()), " ")
		return false
	})
	return truncateRunes(title, maxTitleRunes)
}

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// documentBase is the first <base href> resolved against the page, or the
// page itself when there is none or it is unusable.
func documentBase(doc *goquery.Document, page *frontier.BaseURL) *frontier.BaseURL {
	href, ok := doc.Find("base[href]").First().Attr("href")
	if !ok {
		return page
	}
	abs, err := page.Resolve(strings.TrimSpace(href))
	if err != nil {
		return page
	}
	if b, err := frontier.ParseBaseURL(abs); err == nil {
		return b
	}
	return page
}

// collectLinks resolves every <a href> and <area href> against base,
// dropping what cannot be fetched (other schemes, fragments, junk).
func collectLinks(doc *goquery.Document, base *frontier.BaseURL) []frontier.Link {
	var links []frontier.Link
	seen := make(map[string]struct{})
	doc.Find("a[href], area[href]").EachWithBreak(func(_ int, s *goquery.Selection) bool {
		href := strings.TrimSpace(s.AttrOr("href", ""))
		if href == "" || strings.HasPrefix(href, "#") {
			return true // the page itself
		}
		link, err := base.ResolveLink(href)
		if err != nil {
			return true // javascript:, mailto:, data:, tel:, unparsable
		}
		if _, dup := seen[link.URL]; dup {
			return true
		}
		seen[link.URL] = struct{}{}
		links = append(links, link)
		return len(links) < maxLinksPerPage
	})
	return links
}
