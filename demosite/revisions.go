package demosite

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Pages carry validators and answer conditional requests, as a real site's
// static pages do: each page has a revision, 0 when the site starts, that
// Host.Change moves on. A page's ETag names its revision, its Last-Modified
// is when the revision began (the site's start for revision 0), and a GET
// whose If-None-Match names the current ETag, or, without If-None-Match,
// whose If-Modified-Since is no earlier than Last-Modified, is answered 304
// with no body. A changed page says so in its text.

// revision is one page's current revision.
type revision struct {
	n  int
	at time.Time // Last-Modified, whole seconds
}

// Change gives each of the given pages of h a new revision: new content,
// a new ETag, and a Last-Modified of now, at least a second after the one
// it replaces so that If-Modified-Since can tell them apart. Pages out of
// range are ignored.
func (h *Host) Change(pages ...int) {
	now := h.site.now().UTC().Truncate(time.Second)
	h.revMu.Lock()
	defer h.revMu.Unlock()
	if h.revs == nil {
		h.revs = make(map[int]revision)
	}
	for _, i := range pages {
		if i < 0 || i >= h.spec.Pages {
			continue
		}
		r := h.revisionLocked(i)
		h.revs[i] = revision{n: r.n + 1, at: maxTime(now, r.at.Add(time.Second))}
	}
}

// BodyBytes is the number of response body bytes the host has sent, all
// requests together.
func (h *Host) BodyBytes() int64 {
	h.logMu.Lock()
	defer h.logMu.Unlock()
	return h.bodyBytes
}

func (h *Host) revision(i int) revision {
	h.revMu.Lock()
	defer h.revMu.Unlock()
	return h.revisionLocked(i)
}

func (h *Host) revisionLocked(i int) revision {
	if r, ok := h.revs[i]; ok {
		return r
	}
	return revision{at: h.site.started.UTC().Truncate(time.Second)}
}

func (r revision) etag(page int) string { return fmt.Sprintf(`"p%d-r%d"`, page, r.n) }

// validate sets page i's validators on hdr and reports whether req's
// conditions say the client's copy is current (RFC 9110 §13.2.2).
func (h *Host) validate(hdr http.Header, req *http.Request, i int) (notModified bool) {
	rev := h.revision(i)
	etag := rev.etag(i)
	hdr.Set("ETag", etag)
	hdr.Set("Last-Modified", rev.at.Format(http.TimeFormat))
	if inm := req.Header.Get("If-None-Match"); inm != "" {
		return matchesETag(inm, etag)
	}
	since, err := http.ParseTime(req.Header.Get("If-Modified-Since"))
	return err == nil && !rev.at.After(since)
}

// matchesETag reports whether an If-None-Match list names etag, weakly.
func matchesETag(list, etag string) bool {
	for _, tag := range strings.Split(list, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == "*" || tag == etag {
			return true
		}
	}
	return false
}

// writeRevision notes a changed page's revision in its text.
func writeRevision(buf *bytes.Buffer, rev revision) {
	if rev.n > 0 {
		fmt.Fprintf(buf, "<p class=\"revision\">Revision %d, changed %s.</p>\n", rev.n, rev.at.Format(http.TimeFormat))
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
