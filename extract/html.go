package extract

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/net/html"

	"breakwater/frontier"
	"breakwater/store"
)

// ScanHTML reads an HTML page from body as it arrives and returns its
// title and links, holding no more of it than the token being read.
// Bodies that are not HTML (IsHTML: by contentType, or sniffed when it is
// empty) yield nothing and no error, and are not read. The body is decoded
// from its declared or sniffed charset first.
//
// Navigation links come from <a href> and <area href>; frames from
// <iframe src> and <frame src>; requisites from img src and srcset,
// source src and srcset (in <picture>, <video>, <audio>), video src and
// poster, audio, track and embed src, object data, <input type=image> src,
// <link href> whose rel names a stylesheet, icon, preload, modulepreload,
// manifest or apple-touch-icon, script src, SVG image and use href and
// xlink:href, and the url()s, @imports and image-set()s of style
// attributes and <style> elements. Of duplicate attributes the first
// counts, as in a browser.
//
// Links are resolved against the first <base href> when present (also one
// that comes after them: the document's base applies to all its links),
// else against pageURL. The title is the first HTML <title>, not one
// inside <svg> or <math>. Malformed HTML is read as a browser's tokenizer
// would; it is never an error, and a token larger than 1 MiB ends the scan
// with what was found before it.
//
// What the page says about itself is read too (see Page): its robots
// directives, canonical URL, alternates, description, first <h1> and
// language, and each navigation link's anchor text and rel.
func ScanHTML(pageURL, contentType string, body io.Reader) (Page, error) {
	return ScanHTMLWith(pageURL, contentType, body, ScanOptions{})
}

// ScanOptions are what a scan needs to know of the crawler reading the
// page. The zero value is a crawler without a name.
type ScanOptions struct {
	// ProductToken is the crawler's robots product token: a
	// <meta name="TOKEN"> naming it (in any case) adds its directives to
	// those of <meta name="robots">. "" reads only the latter.
	ProductToken string
}

// ScanHTMLWith is ScanHTML for a crawler named in opts.
func ScanHTMLWith(pageURL, contentType string, body io.Reader, opts ScanOptions) (Page, error) {
	br := sniffReaders.Get().(*bufio.Reader)
	br.Reset(body)
	defer func() {
		br.Reset(nil) // the pool must not keep the body alive
		sniffReaders.Put(br)
	}()
	sniff, _ := br.Peek(512)
	mediaType := htmlMediaType(contentType, sniff)
	if mediaType == "" || len(sniff) == 0 {
		return Page{}, nil
	}
	page, err := frontier.ParseBaseURL(pageURL)
	if err != nil {
		return Page{}, fmt.Errorf("scan page: page url: %w", err)
	}
	if strings.TrimSpace(contentType) == "" {
		// The sniffed type carries no charset: leave that to the meta prescan.
		contentType = mediaType
	}
	sc := htmlScan{page: page, links: newLinkSet(page, true), opts: opts, anchorAt: -1}
	z := tokenizers.Get().(*tokenizer)
	z.reset(decodedReader(br, contentType), maxTokenBytes)
	sc.run(z)
	z.release()
	tokenizers.Put(z)
	sc.endAnchor()
	title := strings.ToValidUTF8(strings.Join(strings.Fields(sc.title.String()), " "), "\uFFFD")
	out := Page{Title: truncateRunes(title, maxTitleRunes), Links: sc.links.links, Robots: sc.robots,
		Description: sc.description, H1: sc.h1.String(), Lang: sc.lang}
	sc.resolveSelf(&out)
	return out, nil
}

// sniffReaders are the buffered readers pages are sniffed and read
// through: one a page was a tenth of what a small page's scan allocated.
var sniffReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}

// tokenizers are the pages' tokenizers, kept with their windows.
var tokenizers = sync.Pool{New: func() any { return new(tokenizer) }}

// htmlScan is one page's scan in progress.
type htmlScan struct {
	// nameBuf holds the tag name just read (tagName).
	nameBuf  []byte
	page     *frontier.BaseURL
	baseSeen bool
	links    *linkSet
	// foreign counts the open <svg> and <math> elements: a <title> inside
	// them is not the page's.
	foreign   int
	inTitle   bool
	titleDone bool
	title     strings.Builder
	// inStyle: the next text token is a <style> element's stylesheet.
	inStyle bool
	attrs   tagAttrs
	scratch []byte // a <style> element's CSS, held for the lexer
	// inScript: the next text token is a script, no text a reader sees.
	inScript bool

	// What the page says about itself (selfdesc.go).
	opts          ScanOptions
	robots        store.Directives
	description   string
	descSeen      bool
	lang          string
	langSeen      bool
	canonicalRef  string
	alternateRefs []store.Alternate // URL as written, resolved at the end
	inH1, h1Done  bool
	h1            textBuf
	// anchorAt is the index in links of the open <a>'s link, -1 when none
	// is open; its text and the alt of its first image gather meanwhile.
	anchorAt   int
	anchorText textBuf
	anchorAlt  string
}

func (sc *htmlScan) run(z *tokenizer) {
	for {
		tt := z.Next()
		inStyle, inScript := sc.inStyle, sc.inScript
		sc.inStyle, sc.inScript = false, false
		switch tt {
		case errorToken:
			return // io.EOF, a read error or a token over maxTokenBytes
		case textToken:
			text := z.Text() // a second call would return nothing
			switch {
			case sc.inTitle:
				if sc.title.Len() < 4*maxTitleRunes {
					sc.title.Write(text)
				}
			case inStyle:
				sc.styleSheetLinks(text)
			case !inScript:
				sc.readText(text)
			}
		case startTagToken:
			var name []byte
			var hasAttr bool
			name, hasAttr, sc.nameBuf = tagName(z.Raw(), sc.nameBuf)
			sc.breakWords(name)
			sc.startTag(z, name, hasAttr)
		case endTagToken:
			var name []byte
			name, _, sc.nameBuf = tagName(z.Raw(), sc.nameBuf)
			sc.breakWords(name)
			switch string(name) {
			case "svg", "math":
				sc.foreign = max(sc.foreign-1, 0)
			case "title":
				if sc.inTitle {
					sc.inTitle, sc.titleDone = false, true
				}
			case "a":
				sc.endAnchor()
			case "h1":
				if sc.inH1 {
					sc.inH1, sc.h1Done = false, true
				}
			}
		}
		if sc.links.full() && sc.titleDone && sc.baseSeen && sc.h1Done {
			return
		}
	}
}

func (sc *htmlScan) startTag(z *tokenizer, rawName []byte, hasAttr bool) {
	name := knownElement(rawName)
	switch name {
	case "svg", "math":
		if !selfClosing(z) {
			sc.foreign++
		}
	case "title":
		if sc.foreign == 0 && !sc.titleDone && !selfClosing(z) {
			sc.inTitle = true
		}
	case "style":
		// The tokenizer reads what follows as raw text, even after <style/>.
		sc.inStyle = true
	case "script":
		sc.inScript = true
	case "a":
		sc.endAnchor() // an <a> inside another ends it, as a browser's parser does
	case "h1":
		if sc.foreign == 0 && !sc.h1Done && !sc.inH1 && !selfClosing(z) {
			sc.inH1 = true
			sc.h1.reset(maxH1Runes)
		}
	}
	want := wantedAttrs(name)
	if !hasAttr || want == setOf(attrStyle) && !mayHaveStyle(z.Raw()) {
		return // reading attributes costs the tokenizer a copy each
	}
	a := &sc.attrs
	a.read(z.Raw(), want)
	sc.elementLinks(a, name)
	if a.has(attrStyle) {
		if name == "" {
			name = string(rawName)
		}
		sc.styleLinks(a.style, name)
	}
}

// elementLinks takes the links of a known element from its attributes.
func (sc *htmlScan) elementLinks(a *tagAttrs, name string) {
	switch name {
	case "base":
		if a.has(attrHref) && !sc.baseSeen {
			sc.endAnchor() // the links are taken again: their indexes change
			sc.setBase(a.get(attrHref))
		}
	case "a":
		if i := sc.takeAnchor(a, name); i >= 0 {
			sc.anchorAt, sc.anchorAlt = i, ""
			sc.anchorText.reset(maxAnchorRunes)
		}
	case "area":
		if i := sc.takeAnchor(a, name); i >= 0 && sc.links.links[i].Text == "" {
			sc.links.links[i].Text = collapse(a.get(attrAlt), maxAnchorRunes)
		}
	case "meta":
		sc.meta(a)
	case "html":
		if !sc.langSeen {
			sc.langSeen, sc.lang = true, collapse(a.get(attrLang), maxLangRunes)
		}
	case "iframe", "frame":
		sc.take(a, attrSrc, Frame, name)
	case "img", "source":
		i, _ := sc.take(a, attrSrc, Requisite, name)
		sc.takeSrcset(a, name)
		if a.has(attrAlt) {
			// The image's alt is its own link's text, and stands for the
			// text of a link it is in when that link has none.
			alt := collapse(a.get(attrAlt), maxAnchorRunes)
			if i >= 0 && sc.links.links[i].Text == "" {
				sc.links.links[i].Text = alt
			}
			if sc.anchorAt >= 0 && sc.anchorAlt == "" {
				sc.anchorAlt = alt
			}
		}
	case "video":
		sc.take(a, attrSrc, Requisite, name)
		sc.take(a, attrPoster, Requisite, name)
	case "audio", "track", "embed", "script":
		sc.take(a, attrSrc, Requisite, name)
	case "object":
		sc.take(a, attrData, Requisite, name)
	case "input":
		if strings.EqualFold(strings.TrimSpace(a.get(attrType)), "image") {
			sc.take(a, attrSrc, Requisite, name)
		}
	case "link":
		if requisiteRel(a.get(attrRel)) {
			sc.take(a, attrHref, Requisite, name)
		}
		sc.linkRelation(a)
	case "image", "use":
		sc.take(a, attrHref, Requisite, name)
		sc.take(a, attrXlinkHref, Requisite, name)
	}
}

// knownElement returns the name of an element startTag handles, as a
// constant (the links keep it: a copy of each tag's name would cost an
// allocation a tag), or "".
func knownElement(name []byte) string {
	switch string(name) {
	case "svg":
		return "svg"
	case "math":
		return "math"
	case "title":
		return "title"
	case "style":
		return "style"
	case "base":
		return "base"
	case "a":
		return "a"
	case "area":
		return "area"
	case "iframe":
		return "iframe"
	case "frame":
		return "frame"
	case "img":
		return "img"
	case "source":
		return "source"
	case "video":
		return "video"
	case "audio":
		return "audio"
	case "track":
		return "track"
	case "embed":
		return "embed"
	case "script":
		return "script"
	case "object":
		return "object"
	case "input":
		return "input"
	case "link":
		return "link"
	case "image":
		return "image"
	case "use":
		return "use"
	case "meta":
		return "meta"
	case "html":
		return "html"
	case "h1":
		return "h1"
	}
	return ""
}

// take adds the tag's attribute, if it has it, as a link of kind, and
// returns the link's index in links (-1 if none) and whether it is new.
func (sc *htmlScan) take(a *tagAttrs, attr attrName, kind Kind, element string) (int, bool) {
	if !a.has(attr) {
		return -1, false
	}
	return sc.links.add(a.get(attr), kind, element, attrNames[attr])
}

func (sc *htmlScan) takeSrcset(a *tagAttrs, element string) {
	if a.has(attrSrcset) {
		for _, url := range srcsetURLs(a.get(attrSrcset)) {
			sc.links.add(url, Requisite, element, "srcset")
		}
	}
}

// styleSheetLinks takes the URLs of a <style> element's stylesheet:
// requisites, resolved against the document's base, marked by the CSS
// construct they came from.
func (sc *htmlScan) styleSheetLinks(text []byte) {
	cs := cssScan{take: func(ref, construct string) { sc.links.add(ref, Requisite, "style", construct) }}
	lexBytes(text, &sc.scratch, cs.token)
}

// styleLinks takes the URLs of an element's style attribute (in a buffer
// with room for the lexer's sentinel).
func (sc *htmlScan) styleLinks(style []byte, element string) {
	cs := cssScan{take: func(ref, _ string) { sc.links.add(ref, Requisite, element, "style") }}
	lexWindow(style, true, cs.token)
}

// requisiteRel reports whether a <link>'s rel (a set of space-separated
// keywords, in any case) makes its target part of the page.
func requisiteRel(rel string) bool {
	for _, kw := range strings.Fields(rel) {
		switch strings.ToLower(kw) {
		case "stylesheet", "icon", "preload", "modulepreload", "manifest",
			"apple-touch-icon", "apple-touch-icon-precomposed":
			return true
		}
	}
	return false
}

// selfClosing reports whether the token just read was written <x/>.
func selfClosing(z *tokenizer) bool {
	raw := z.Raw()
	return len(raw) >= 2 && raw[len(raw)-2] == '/'
}

// setBase takes the document's first <base href>: the links taken before
// it are resolved again against it.
func (sc *htmlScan) setBase(href string) {
	sc.baseSeen = true
	abs, err := sc.page.Resolve(strings.TrimSpace(href))
	if err == nil {
		if b, err := frontier.ParseBaseURL(abs); err == nil {
			sc.links.rebase(b)
			return
		}
	}
	sc.links.settle()
}

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// attrName is one of the attributes links are taken from.
type attrName uint8

const (
	attrHref attrName = iota
	attrSrc
	attrSrcset
	attrPoster
	attrData
	attrType
	attrRel
	attrXlinkHref
	attrStyle
	attrMetaName
	attrContent
	attrLang
	attrHreflang
	attrAlt
	numAttrs
)

var attrNames = [numAttrs]string{"href", "src", "srcset", "poster", "data", "type", "rel", "xlink:href", "style",
	"name", "content", "lang", "hreflang", "alt"}

// attrSet is a set of attrNames.
type attrSet uint16

func setOf(names ...attrName) attrSet {
	var s attrSet
	for _, n := range names {
		s |= 1 << n
	}
	return s
}

// wantedAttrs returns the attributes read from an element: those its
// links come from, and style.
func wantedAttrs(element string) attrSet {
	switch element {
	case "base":
		return setOf(attrHref, attrStyle)
	case "a":
		return setOf(attrHref, attrRel, attrStyle)
	case "area":
		return setOf(attrHref, attrRel, attrAlt, attrStyle)
	case "meta":
		return setOf(attrMetaName, attrContent, attrStyle)
	case "html":
		return setOf(attrLang, attrStyle)
	case "iframe", "frame", "audio", "track", "embed", "script":
		return setOf(attrSrc, attrStyle)
	case "img":
		return setOf(attrSrc, attrSrcset, attrAlt, attrStyle)
	case "source":
		return setOf(attrSrc, attrSrcset, attrStyle)
	case "video":
		return setOf(attrSrc, attrPoster, attrStyle)
	case "object":
		return setOf(attrData, attrStyle)
	case "input":
		return setOf(attrSrc, attrType, attrStyle)
	case "link":
		return setOf(attrHref, attrRel, attrHreflang, attrStyle)
	case "image", "use":
		return setOf(attrHref, attrXlinkHref, attrStyle)
	}
	return setOf(attrStyle)
}

// tagAttrs holds the wanted attributes of the tag just read, the first of
// each name (a browser ignores later duplicates). It is reused from tag to
// tag: only the attributes read cost an allocation.
type tagAttrs struct {
	seen attrSet
	val  [numAttrs]string
	// style is kept as bytes, with room for the CSS lexer's sentinel.
	style []byte
}

func (a *tagAttrs) read(raw []byte, want attrSet) {
	a.seen = 0
	if rawAttrs(raw, func(key, val []byte) { a.take(want, key, val) }) {
		return // read in place (rawattrs.go)
	}
	// Values to rewrite (entities, NULs, line breaks): x/net reads this
	// one tag, as it reads it in a page.
	z := html.NewTokenizer(bytes.NewReader(raw))
	z.Next()
	for more := true; more; {
		var key, val []byte
		key, val, more = z.TagAttr()
		a.take(want, key, val)
	}
}

// take keeps the attribute key=val if it is wanted and the first of its
// name.
func (a *tagAttrs) take(want attrSet, key, val []byte) {
	n, ok := attrNameOf(key)
	if !ok || want&(1<<n) == 0 || a.seen&(1<<n) != 0 {
		return
	}
	a.seen |= 1 << n
	if n == attrStyle {
		a.style = append(append(a.style[:0], val...), 0)[:len(val)]
	} else {
		a.val[n] = string(val)
	}
}

func (a *tagAttrs) has(n attrName) bool { return a.seen&(1<<n) != 0 }

// get returns the attribute's value, or "" when the tag has none.
func (a *tagAttrs) get(n attrName) string {
	if !a.has(n) {
		return ""
	}
	return a.val[n]
}

// mayHaveStyle reports whether a raw tag holds "style" in any case: if
// not, it has no style attribute.
func mayHaveStyle(raw []byte) bool {
	for i := 0; i+5 <= len(raw); i++ {
		if raw[i]|0x20 == 's' && raw[i+1]|0x20 == 't' && raw[i+2]|0x20 == 'y' && raw[i+3]|0x20 == 'l' && raw[i+4]|0x20 == 'e' {
			return true
		}
	}
	return false
}

func attrNameOf(key []byte) (attrName, bool) {
	switch string(key) {
	case "href":
		return attrHref, true
	case "src":
		return attrSrc, true
	case "srcset":
		return attrSrcset, true
	case "poster":
		return attrPoster, true
	case "data":
		return attrData, true
	case "type":
		return attrType, true
	case "rel":
		return attrRel, true
	case "xlink:href":
		return attrXlinkHref, true
	case "style":
		return attrStyle, true
	case "name":
		return attrMetaName, true
	case "content":
		return attrContent, true
	case "lang":
		return attrLang, true
	case "hreflang":
		return attrHreflang, true
	case "alt":
		return attrAlt, true
	}
	return 0, false
}
