package store

// The link graph: every link a page holds, kept so that a report can say
// which pages link to a broken URL, with what words, and a resume with a
// wider scope can queue what a narrower one left out.

// LinkKind is what a link is to its page: a page to go on to, or part of
// the page (a requisite, a frame); or, for a redirect, where it leads.
type LinkKind uint8

const (
	LinkNavigation LinkKind = iota
	LinkRequisite
	LinkFrame
	// LinkRedirect is a redirect's Location: the redirect's only link,
	// followed at the redirect's own depth.
	LinkRedirect
)

func (k LinkKind) String() string {
	switch k {
	case LinkNavigation:
		return "navigation"
	case LinkRequisite:
		return "requisite"
	case LinkFrame:
		return "frame"
	case LinkRedirect:
		return "redirect"
	}
	return "unknown"
}

// MarshalText writes the kind's name, as exports show it.
func (k LinkKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// LinkRel holds the rel values of a link that say what the site thinks
// of it (rel="nofollow ugc sponsored"), as bits.
type LinkRel uint8

const (
	RelNofollow LinkRel = 1 << iota
	RelUGC
	RelSponsored
)

// Names returns the rel values set, in the order nofollow, ugc,
// sponsored.
func (r LinkRel) Names() []string {
	var out []string
	for _, v := range []struct {
		bit  LinkRel
		name string
	}{{RelNofollow, "nofollow"}, {RelUGC, "ugc"}, {RelSponsored, "sponsored"}} {
		if r&v.bit != 0 {
			out = append(out, v.name)
		}
	}
	return out
}

// Edge is one link of the graph: from a page to a target, as found.
type Edge struct {
	From string   `json:"from"` // the page's URL
	To   string   `json:"to"`   // the target's URL, absolute, without fragment
	Kind LinkKind `json:"kind"`
	Rel  LinkRel  `json:"-"`
	// Text is the anchor text, whitespace collapsed and capped, or the alt
	// text of a linked image when the link has no text of its own.
	Text string `json:"text,omitempty"`
	// Element and Attr are where the link was written: "a" and "href",
	// "img" and "srcset", "@import" in a stylesheet.
	Element string `json:"element,omitempty"`
	Attr    string `json:"attr,omitempty"`
}

// PageLinks is one page of the link graph with what its record keeps of
// it: what a resume with a wider scope reads to queue the links the
// narrower one refused.
type PageLinks struct {
	URL   string
	Page  LinksPage
	Links []Outlink // each Edge.To named by its URL; From left empty
}
