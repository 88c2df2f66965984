package extract

import (
	"fmt"
	"strings"

	"breakwater/frontier"
	"breakwater/store"
)

// Kind says what a link is to the page it was found in. The kinds are
// ordered: a URL found as two kinds keeps the greater.
type Kind uint8

const (
	// Navigation is a page the crawl may go on to: <a href>, <area href>.
	Navigation Kind = iota
	// Requisite is part of what makes the page: images, scripts,
	// stylesheets, icons, media, and the url()s and @imports of its CSS.
	Requisite
	// Frame is a document embedded in the page (<iframe src>, <frame
	// src>): fetched as a requisite, and scanned as a page.
	Frame
)

// String returns "navigation", "requisite" or "frame".
func (k Kind) String() string {
	switch k {
	case Navigation:
		return "navigation"
	case Requisite:
		return "requisite"
	case Frame:
		return "frame"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Link is one link found, ready for the frontier, with where it came from.
type Link struct {
	// Link is the URL, absolute and without its fragment, in the form it
	// was written (not canonical), with its host key and dedupe hash.
	frontier.Link
	Kind Kind
	// Element is where the link came from: the HTML element ("img",
	// "link", "style" for a <style> element), or in a stylesheet the
	// construct ("@import", "url", "image-set").
	Element string
	// Attr is the HTML attribute ("src", "srcset", "href", "xlink:href",
	// "poster", "data", "style"); in a <style> element the construct
	// ("@import", "url", "image-set"); empty in a stylesheet.
	Attr string
	// Text is a navigation link's anchor text, whitespace collapsed and
	// capped, or the alt text of the image it holds when it has no text.
	Text string
	// Rel is what the link's rel attribute says of it (nofollow, ugc,
	// sponsored).
	Rel store.LinkRel
}

// Page is what a scan of an HTML page found.
type Page struct {
	// Title is the first HTML <title>, whitespace collapsed, valid UTF-8,
	// at most 512 runes.
	Title string
	// Links are in document order, each URL once.
	Links []Link

	// Robots are the directives of <meta name="robots"> and of a <meta>
	// named with the crawler's product token (ScanOptions), together.
	Robots store.Directives
	// Canonical is the URL of the first <link rel="canonical">, resolved
	// like the links; "" when there is none (or it cannot be fetched).
	Canonical string
	// Alternates are the <link rel="alternate" hreflang>s, in document
	// order, resolved, at most 100.
	Alternates []store.Alternate
	// Description is the first <meta name="description">'s content, H1
	// the text of the first <h1>, Lang the <html lang>: whitespace
	// collapsed, valid UTF-8, at most 512 runes (Lang 64).
	Description string
	H1          string
	Lang        string
}

const (
	// maxTitleRunes caps the stored page title.
	maxTitleRunes = 512
	// maxLinks caps the links taken from one page or stylesheet, so a
	// generated page of a million links cannot flood the frontier.
	maxLinks = 10000
	// maxTokenBytes caps one token of the HTML tokenizer or the CSS lexer:
	// a tag, text run or CSS token larger than this (a 256 KiB attribute
	// is fine) ends the scan.
	maxTokenBytes = 1 << 20
)

// linkSet collects the links of one document: resolved against its base,
// de-duplicated by URL in document order, capped at maxLinks.
type linkSet struct {
	base  *frontier.BaseURL
	links []Link
	at    map[string]int // URL -> its index in links
	// refs, when kept, holds the reference each link was resolved from
	// (refs[i] for links[i]), so that a late <base> can resolve them again.
	refs     []string
	keepRefs bool
}

// initialLinks is the room a link set starts with.
const initialLinks = 16

func newLinkSet(base *frontier.BaseURL, keepRefs bool) *linkSet {
	// Room for a typical page's links up front: growing the slice from one
	// was a tenth of a small page's scan.
	return &linkSet{base: base, links: make([]Link, 0, initialLinks), at: map[string]int{}, keepRefs: keepRefs}
}

// full reports whether the cap is reached.
func (s *linkSet) full() bool { return len(s.links) >= maxLinks }

// add resolves ref and takes it unless it cannot be fetched (other
// schemes, fragments, junk) or the cap is reached. A URL taken already
// keeps its place, and takes kind and origin when kind is the greater.
// It returns the link's index in links, -1 when none was taken, and
// whether the link is new.
func (s *linkSet) add(ref string, kind Kind, element, attr string) (int, bool) {
	ref = strings.TrimSpace(ref)
	if ref == "" || ref[0] == '#' || s.full() {
		return -1, false // the document itself, or one link too many
	}
	link, err := s.base.ResolveLink(ref)
	if err != nil {
		return -1, false // javascript:, mailto:, data:, tel:, unparsable
	}
	if i, dup := s.at[link.URL]; dup {
		if kind > s.links[i].Kind {
			s.links[i].Kind, s.links[i].Element, s.links[i].Attr = kind, element, attr
		}
		return i, false
	}
	s.at[link.URL] = len(s.links)
	s.links = append(s.links, Link{Link: link, Kind: kind, Element: element, Attr: attr})
	if s.keepRefs {
		s.refs = append(s.refs, ref)
	}
	return len(s.links) - 1, true
}

// settle stops keeping references: the document's base is settled.
func (s *linkSet) settle() { s.refs, s.keepRefs = nil, false }

// rebase resolves the links taken so far again against base, and settles
// it as the document's base.
func (s *linkSet) rebase(base *frontier.BaseURL) {
	earlier, refs := s.links, s.refs
	s.base, s.links, s.refs, s.keepRefs = base, nil, nil, false
	clear(s.at)
	for i, l := range earlier {
		j, added := s.add(refs[i], l.Kind, l.Element, l.Attr)
		switch {
		case j < 0:
		case added:
			s.links[j].Text, s.links[j].Rel = l.Text, l.Rel
		default: // two references that the base makes one URL
			if s.links[j].Text == "" {
				s.links[j].Text = l.Text
			}
			s.links[j].Rel &= l.Rel
		}
	}
}
