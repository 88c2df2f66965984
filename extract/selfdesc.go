package extract

import (
	"strings"

	"breakwater/store"
)

// What a page says about itself, and about its links: read by the HTML
// scan as the tags go by, held in the htmlScan until the page ends.

const (
	// maxAnchorRunes caps a link's anchor text.
	maxAnchorRunes = 200
	// maxH1Runes and maxDescriptionRunes cap the first <h1>'s text and the
	// meta description, as maxTitleRunes does the title.
	maxH1Runes          = 512
	maxDescriptionRunes = 512
	// maxLangRunes caps <html lang> and an alternate's hreflang: a
	// language tag is a few letters; more is junk.
	maxLangRunes = 64
	// maxAlternates caps the alternates kept of one page.
	maxAlternates = 100
	// maxSelfURLBytes caps a canonical or alternate URL as written: they
	// are kept until the page's base is settled, and a longer one is junk.
	maxSelfURLBytes = 8 << 10
)

// readText gives text a reader sees to the elements gathering it.
func (sc *htmlScan) readText(text []byte) {
	if sc.anchorAt >= 0 {
		sc.anchorText.add(text)
	}
	if sc.inH1 {
		sc.h1.add(text)
	}
}

// breakWords ends the words being gathered at a tag that breaks them.
func (sc *htmlScan) breakWords(name []byte) {
	if (sc.anchorAt >= 0 || sc.inH1) && breaksWords(name) {
		sc.anchorText.wordBreak()
		sc.h1.wordBreak()
	}
}

// takeAnchor takes an <a> or <area>'s href as a navigation link with its
// rel. A URL linked several times keeps only the rel values all its links
// share: one followed link to it is enough to follow it.
func (sc *htmlScan) takeAnchor(a *tagAttrs, element string) int {
	i, added := sc.take(a, attrHref, Navigation, element)
	if i < 0 {
		return -1
	}
	rel := parseLinkRel(a.get(attrRel))
	if added {
		sc.links.links[i].Rel = rel
	} else {
		sc.links.links[i].Rel &= rel
	}
	return i
}

// endAnchor gives the open <a>'s link its text, or the alt of its first
// image, unless an earlier link to the same URL gave it one.
func (sc *htmlScan) endAnchor() {
	if sc.anchorAt < 0 {
		return
	}
	text := sc.anchorText.String()
	if text == "" {
		text = sc.anchorAlt
	}
	if l := &sc.links.links[sc.anchorAt]; l.Text == "" {
		l.Text = text
	}
	sc.anchorAt = -1
}

// meta reads <meta name="robots">, <meta name="PRODUCT-TOKEN"> and the
// first <meta name="description">. The names are matched in any case;
// the directives of several tags add up.
func (sc *htmlScan) meta(a *tagAttrs) {
	if !a.has(attrMetaName) || sc.foreign > 0 {
		return
	}
	name := strings.TrimSpace(a.get(attrMetaName))
	switch {
	case strings.EqualFold(name, "robots"),
		sc.opts.ProductToken != "" && strings.EqualFold(name, sc.opts.ProductToken):
		sc.robots |= ParseRobotsDirectives(a.get(attrContent))
	case strings.EqualFold(name, "description") && !sc.descSeen:
		sc.descSeen, sc.description = true, collapse(a.get(attrContent), maxDescriptionRunes)
	}
}

// linkRelation reads a <link> that names the page's canonical URL (the
// first one counts) or a version of it in another language.
func (sc *htmlScan) linkRelation(a *tagAttrs) {
	href := a.get(attrHref)
	if !a.has(attrHref) || len(href) > maxSelfURLBytes || sc.foreign > 0 {
		return
	}
	for _, kw := range strings.Fields(a.get(attrRel)) {
		switch {
		case strings.EqualFold(kw, "canonical") && sc.canonicalRef == "":
			sc.canonicalRef = href
		case strings.EqualFold(kw, "alternate") && a.has(attrHreflang) && len(sc.alternateRefs) < maxAlternates:
			if lang := collapse(a.get(attrHreflang), maxLangRunes); lang != "" {
				sc.alternateRefs = append(sc.alternateRefs, store.Alternate{Hreflang: lang, URL: href})
			}
		}
	}
}

// resolveSelf resolves the canonical and alternate URLs against the
// document's base, now settled, into page. One that cannot be fetched
// (another scheme, junk) is dropped.
func (sc *htmlScan) resolveSelf(page *Page) {
	if sc.canonicalRef != "" {
		page.Canonical = sc.resolve(sc.canonicalRef)
	}
	for _, alt := range sc.alternateRefs {
		if u := sc.resolve(alt.URL); u != "" {
			page.Alternates = append(page.Alternates, store.Alternate{Hreflang: alt.Hreflang, URL: u})
		}
	}
}

func (sc *htmlScan) resolve(ref string) string {
	link, err := sc.links.base.ResolveLink(strings.TrimSpace(ref))
	if err != nil {
		return ""
	}
	return link.URL
}
