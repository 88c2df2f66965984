package store

import (
	"encoding/json"
	"fmt"
)

// Directives are what a page's robots directives (<meta name="robots">,
// the X-Robots-Tag header) tell crawlers and search engines to do with
// it, as bits. "none" is Noindex and Nofollow.
type Directives uint8

const (
	// Noindex: the page is not to be shown in search results.
	Noindex Directives = 1 << iota
	// Nofollow: the page's links are not to be followed.
	Nofollow
	// Noarchive: no cached copy of the page is to be shown.
	Noarchive
	allDirectives = Noindex | Nofollow | Noarchive
)

var directiveNames = []struct {
	bit  Directives
	name string
}{{Noindex, "noindex"}, {Nofollow, "nofollow"}, {Noarchive, "noarchive"}}

// Names returns the directives set, in the order noindex, nofollow,
// noarchive.
func (d Directives) Names() []string {
	var out []string
	for _, v := range directiveNames {
		if d&v.bit != 0 {
			out = append(out, v.name)
		}
	}
	return out
}

// MarshalJSON writes the directives as a list of their names.
func (d Directives) MarshalJSON() ([]byte, error) {
	names := d.Names()
	if names == nil {
		names = []string{}
	}
	return json.Marshal(names)
}

// UnmarshalJSON reads a list of directive names, as MarshalJSON writes.
func (d *Directives) UnmarshalJSON(b []byte) error {
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		return fmt.Errorf("robots directives: %w", err)
	}
	*d = 0
next:
	for _, n := range names {
		for _, v := range directiveNames {
			if n == v.name {
				*d |= v.bit
				continue next
			}
		}
		return fmt.Errorf("robots directives: unknown directive %q", n)
	}
	return nil
}

// Alternate is a version of a page in another language or for another
// region, as the page names it (<link rel="alternate" hreflang>).
type Alternate struct {
	Hreflang string `json:"hreflang"`
	URL      string `json:"url"`
}
