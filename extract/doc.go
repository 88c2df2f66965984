// Package extract finds the links in what the crawler fetches: the pages
// (ScanHTML) and the stylesheets (ScanCSS). It owns telling the kinds of
// link apart, the HTML elements and attributes each kind comes from, the
// srcset grammar, the CSS tokens that name a URL (url(), @import,
// image-set()), the charset a body is decoded from, the page's title, and
// what a page says about itself and its links: its robots directives
// (<meta name="robots"> and the crawler's own, ParseRobotsDirectives, which
// the crawl also reads X-Robots-Tag with), canonical URL, hreflang
// alternates, description, first <h1> and language, and each navigation
// link's anchor text and rel.
//
// Kinds: a Navigation link (<a>, <area>) is a page the crawl may go on to,
// within its scope; a Requisite (images, scripts, stylesheets, icons,
// media, url() in CSS...) is what makes the page look as it did, fetched
// whatever the scope; a Frame (<iframe>, <frame>) is a document embedded
// in the page, fetched like a requisite and read as a page in turn.
//
// Invariants, for every scan: each link is an absolute http(s) URL in its
// original (not canonical) form, without a fragment, whose Host and Hash
// are those frontier.ParseLink gives; a URL appears once, at its first
// place in the document, with the strongest kind it was found as (Frame
// over Requisite over Navigation, since what is fetched whatever the scope
// must not be demoted to a link the scope may drop); there are at most
// 10,000 links. data:, javascript: and the other schemes, and references
// to the document itself (empty, or only a fragment), are dropped.
//
// Both scans stream: an HTML page goes through the x/net/html tokenizer
// and a stylesheet through the tdewolff/parse CSS lexer, holding no more
// of the body than the token being read (a DOM or a whole stylesheet per
// worker would cost far more than the links). One token over 1 MiB ends a
// scan with the links found before it. Malformed input is read as a
// browser would and is never an error; only an unusable page or
// stylesheet URL is.
//
// Concurrency: the functions keep no state between calls and are safe for
// concurrent use.
package extract
