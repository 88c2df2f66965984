package crawl

import (
	"net/http"
	"strings"

	"breakwater/extract"
	"breakwater/frontier"
	"breakwater/store"
)

// Robots directives in pages: what a page (<meta name="robots">, a <meta>
// named with our product token) and its answer (X-Robots-Tag) say
// crawlers may do with it, and what it says of itself (its canonical URL,
// in the HTML or the Link header). They are recorded with every 2xx
// result; nofollow (and none) keeps the page's navigation links from
// being followed unless --robots-meta=false. Its requisites are fetched
// all the same: they are part of the page, not pages it leads to.

// maxAlternates caps the alternates recorded of one page, the HTML's and
// the Link header's together.
const maxAlternates = 100

// robotsTagDirectives reads an answer's X-Robots-Tag headers: the
// directives that apply to all crawlers, and those scoped to ours
// ("breakwater: noindex", the product token in any case).
func robotsTagDirectives(h http.Header, token string) store.Directives {
	var d store.Directives
	for _, v := range h.Values("X-Robots-Tag") {
		d |= parseRobotsTag(v, token)
	}
	return d
}

// parseRobotsTag reads one X-Robots-Tag value: a comma-separated list of
// directives, where "TOKEN: directive" scopes that directive and those
// after it to one crawler, until another scope. Directives that take a
// value ("unavailable_after: ...", "max-snippet: 20") are not scopes.
func parseRobotsTag(value, token string) store.Directives {
	var d store.Directives
	scope := ""
	for _, item := range strings.Split(value, ",") {
		if name, rest, ok := strings.Cut(item, ":"); ok && isScope(strings.TrimSpace(name)) {
			scope, item = strings.TrimSpace(name), rest
		}
		if scope == "" || strings.EqualFold(scope, token) {
			d |= extract.ParseRobotsDirectives(item)
		}
	}
	return d
}

// isScope reports whether name, before a colon, names a crawler rather
// than a directive that takes a value.
func isScope(name string) bool {
	switch strings.ToLower(name) {
	case "", "unavailable_after", "max-snippet", "max-image-preview", "max-video-preview":
		return false
	}
	for _, c := range name {
		if !(c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// linkHeaderFacts reads an answer's Link headers for the page's canonical
// URL (the first rel="canonical") and its alternates (rel="alternate"
// with hreflang), resolved against the answer's URL; unusable ones are
// dropped.
func linkHeaderFacts(h http.Header, pageURL string) (canonical string, alternates []store.Alternate) {
	values := h.Values("Link")
	if len(values) == 0 {
		return "", nil
	}
	base, err := frontier.ParseBaseURL(pageURL)
	if err != nil {
		return "", nil
	}
	for _, v := range values {
		for _, l := range parseLinkHeader(v) {
			link, err := base.ResolveLink(l.ref)
			if err != nil {
				continue
			}
			for _, rel := range strings.Fields(l.rel) {
				switch {
				case strings.EqualFold(rel, "canonical") && canonical == "":
					canonical = link.URL
				case strings.EqualFold(rel, "alternate") && l.hreflang != "":
					alternates = append(alternates, store.Alternate{Hreflang: l.hreflang, URL: link.URL})
				}
			}
		}
	}
	return canonical, alternates
}

// headerLink is one link of a Link header: <ref>; rel="..."; hreflang=...
type headerLink struct{ ref, rel, hreflang string }

// parseLinkHeader reads a Link header value: links separated by commas,
// each a <URI-reference> and ;-separated parameters, whose values may be
// quoted (a comma inside quotes or inside <> separates nothing).
func parseLinkHeader(v string) []headerLink {
	var out []headerLink
	for {
		start := strings.IndexByte(v, '<')
		if start < 0 {
			return out
		}
		end := strings.IndexByte(v[start:], '>')
		if end < 0 {
			return out
		}
		l := headerLink{ref: strings.TrimSpace(v[start+1 : start+end])}
		v = v[start+end+1:]
		params, rest := cutLinkParams(v)
		v = rest
		for _, p := range splitOutsideQuotes(params, ';') {
			key, val, _ := strings.Cut(p, "=")
			val = strings.Trim(strings.TrimSpace(val), `"`)
			switch strings.ToLower(strings.TrimSpace(key)) {
			case "rel":
				if l.rel == "" { // the first rel counts
					l.rel = val
				}
			case "hreflang":
				l.hreflang = val
			}
		}
		out = append(out, l)
	}
}

// cutLinkParams returns the parameters of a link (up to the comma that
// ends it, outside quotes) and what follows that comma.
func cutLinkParams(v string) (params, rest string) {
	quoted := false
	for i := range len(v) {
		switch v[i] {
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				return v[:i], v[i+1:]
			}
		}
	}
	return v, ""
}

func splitOutsideQuotes(s string, sep byte) []string {
	var out []string
	quoted, from := false, 0
	for i := range len(s) {
		switch {
		case s[i] == '"':
			quoted = !quoted
		case s[i] == sep && !quoted:
			out = append(out, s[from:i])
			from = i + 1
		}
	}
	return append(out, s[from:])
}

// recordPageFacts fills r, the result of a 2xx answer, with what the page
// and its headers say about it: the HTML's directives and the header's
// together, the HTML's canonical before the Link header's, the
// alternates of both.
func (e *Engine) recordPageFacts(x *exchange, r *store.Result) {
	p := &x.page
	r.Robots = p.Robots | robotsTagDirectives(x.resp.Header, e.token)
	r.Description, r.H1, r.Lang = p.Description, p.H1, p.Lang
	canonical, alternates := linkHeaderFacts(x.resp.Header, x.resp.URL)
	r.Canonical = p.Canonical
	if r.Canonical == "" {
		r.Canonical = canonical
	}
	if n := len(p.Alternates) + len(alternates); n > 0 {
		r.Hreflang = append(append(make([]store.Alternate, 0, min(n, maxAlternates)), p.Alternates...), alternates...)
		r.Hreflang = r.Hreflang[:min(n, maxAlternates)]
	}
}

// followsLinks reports whether the crawl follows the navigation links of a
// page whose directives are d.
func (e *Engine) followsLinks(d store.Directives) bool {
	return !e.opts.RobotsMeta || d&store.Nofollow == 0
}
