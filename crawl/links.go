package crawl

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
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

// ExtractLinks returns the title and the outgoing links of an HTML page
// held whole; ScanPage does the same work on a page as it streams.
func ExtractLinks(pageURL, contentType string, body []byte) (title string, links []frontier.Link, err error) {
	return ScanPage(pageURL, contentType, bytes.NewReader(body))
}

// ScanPage reads an HTML page from body as it arrives and returns its title
// and outgoing links, holding no more of it than the token being read (a
// DOM of a 10 MiB page, per worker, would cost far more than the page).
// Bodies that are not HTML (by contentType, or sniffed when it is empty)
// yield nothing and no error, and are not read. The body is decoded from
// its declared or sniffed charset first. Links come from <a href> and
// <area href>, resolved against the first <base href> when present (also
// one that comes after them: the document's base applies to all its
// links), else against pageURL; their URLs are absolute http(s) URLs in
// their original (not canonical) form, without fragments, de-duplicated in
// document order and capped at 10,000. The title is the first HTML
// <title>, not one inside <svg> or <math>. Malformed HTML is read as a
// browser's tokenizer would; it is never an error, and a token larger
// than maxTokenBytes ends the scan with what was found before it.
func ScanPage(pageURL, contentType string, body io.Reader) (title string, links []frontier.Link, err error) {
	br := bufio.NewReaderSize(body, 4096)
	sniff, _ := br.Peek(512)
	mediaType := htmlMediaType(contentType, sniff)
	if mediaType == "" || len(sniff) == 0 {
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
	sc := linkScan{page: page, base: page, seen: map[string]struct{}{}}
	sc.run(html.NewTokenizer(decodedReader(br, contentType)))
	title = strings.ToValidUTF8(strings.Join(strings.Fields(sc.title.String()), " "), "\uFFFD")
	return truncateRunes(title, maxTitleRunes), sc.links, nil
}

// maxTokenBytes caps the tokenizer's buffer: one tag or text run larger
// than this (a 256 KiB attribute is fine) ends the scan.
const maxTokenBytes = 1 << 20

// linkScan is one page's scan in progress.
type linkScan struct {
	page, base *frontier.BaseURL
	baseSeen   bool
	links      []frontier.Link
	seen       map[string]struct{} // link URLs taken
	// raw keeps the href of each link taken before a <base> was seen, so
	// that a late <base> can resolve them again.
	raw []string
	// foreign counts the open <svg> and <math> elements: a <title> inside
	// them is not the page's.
	foreign   int
	inTitle   bool
	titleDone bool
	title     strings.Builder
}

func (sc *linkScan) run(z *html.Tokenizer) {
	z.SetMaxBuf(maxTokenBytes)
	for {
		switch z.Next() {
		case html.ErrorToken:
			return // io.EOF, a read error or a token over maxTokenBytes
		case html.TextToken:
			if sc.inTitle && sc.title.Len() < 4*maxTitleRunes {
				sc.title.Write(z.Text())
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			sc.startTag(z, string(name), hasAttr)
		case html.EndTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "svg", "math":
				sc.foreign = max(sc.foreign-1, 0)
			case "title":
				if sc.inTitle {
					sc.inTitle, sc.titleDone = false, true
				}
			}
		}
		if len(sc.links) >= maxLinksPerPage && sc.titleDone && sc.baseSeen {
			return
		}
	}
}

func (sc *linkScan) startTag(z *html.Tokenizer, name string, hasAttr bool) {
	switch name {
	case "svg", "math":
		if !selfClosing(z) {
			sc.foreign++
		}
	case "title":
		if sc.foreign == 0 && !sc.titleDone && !selfClosing(z) {
			sc.inTitle = true
		}
	case "base":
		if href, ok := hrefOf(z, hasAttr); ok && !sc.baseSeen {
			sc.setBase(href)
		}
	case "a", "area":
		if href, ok := hrefOf(z, hasAttr); ok {
			sc.add(href)
		}
	}
}

// selfClosing reports whether the token just read was written <x/>.
func selfClosing(z *html.Tokenizer) bool {
	raw := z.Raw()
	return len(raw) >= 2 && raw[len(raw)-2] == '/'
}

// hrefOf returns the tag's href attribute, trimmed.
func hrefOf(z *html.Tokenizer, hasAttr bool) (string, bool) {
	for hasAttr {
		var key, val []byte
		key, val, hasAttr = z.TagAttr()
		if string(key) == "href" {
			return strings.TrimSpace(string(val)), true
		}
	}
	return "", false
}

// setBase takes the document's first <base href>: the links taken before
// it are resolved again against it.
func (sc *linkScan) setBase(href string) {
	sc.baseSeen = true
	abs, err := sc.page.Resolve(href)
	if err != nil {
		return
	}
	b, err := frontier.ParseBaseURL(abs)
	if err != nil {
		return
	}
	sc.base = b
	earlier := sc.raw
	sc.links, sc.raw, sc.seen = sc.links[:0], nil, map[string]struct{}{}
	for _, h := range earlier {
		sc.add(h)
	}
}

// add resolves href and takes it unless it cannot be fetched (other
// schemes, fragments, junk), was taken already, or the page's cap is
// reached.
func (sc *linkScan) add(href string) {
	if href == "" || strings.HasPrefix(href, "#") || len(sc.links) >= maxLinksPerPage {
		return // the page itself
	}
	link, err := sc.base.ResolveLink(href)
	if err != nil {
		return // javascript:, mailto:, data:, tel:, unparsable
	}
	if _, dup := sc.seen[link.URL]; dup {
		return
	}
	sc.seen[link.URL] = struct{}{}
	sc.links = append(sc.links, link)
	if !sc.baseSeen {
		sc.raw = append(sc.raw, href)
	}
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
// Content-Type, a BOM or a <meta> tag (charset peeks at the first 1024
// bytes). A body declared UTF-8 without a UTF-16 BOM (the one thing that
// outranks the server's charset) is read as is: the tokenizer copes with
// invalid bytes, and the title is made valid at the end.
func decodedReader(body *bufio.Reader, contentType string) io.Reader {
	if bom, _ := body.Peek(2); declaresUTF8(contentType) &&
		!bytes.Equal(bom, []byte{0xFE, 0xFF}) && !bytes.Equal(bom, []byte{0xFF, 0xFE}) {
		return body
	}
	r, err := charset.NewReader(body, contentType)
	if err != nil {
		return body
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

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
