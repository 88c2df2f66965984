// Package sitemap reads sitemaps and sitemap indexes (sitemaps.org 0.9) as
// a stream: Read walks encoding/xml's tokens and hands each <url> or
// <sitemap> entry to a callback, never building the document in memory.
//
// # What it owns
//
// Telling a sitemap from what is not one, and the sitemaps.org limits. A
// body that starts with the gzip magic bytes (0x1f 0x8b) is decompressed,
// whatever its Content-Type or name says. At most Limits.MaxBytes
// uncompressed bytes are read (50 MiB by default): a longer file, and a
// file of more than Limits.MaxURLs entries (50,000), is refused with an
// error wrapping ErrOversized, so a gzip bomb costs at most the cap. A
// file that is not well-formed XML, is corrupt gzip, or whose root element
// is neither <urlset> nor <sitemapindex>, is refused with an error wrapping
// ErrMalformed. Fetching sitemaps, and what to do with their entries
// (scope, nesting depth, the frontier), belong to the caller.
//
// # Caveats
//
// Elements are matched by local name, whatever their namespace, and only
// where the protocol puts them: the <loc> of an <image:image> inside a
// <url> is not the URL's. A <loc> is trimmed of white space; an entry with
// an empty or overlong one (over MaxLocBytes) is left out, as is an
// overlong <lastmod> (its entry is kept, without it). Entries handed to the
// callback before an error was found stay handed: a caller that wants all
// or nothing collects them and drops them on error.
//
// # Concurrency
//
// Read keeps no state between calls; it is safe for concurrent use.
package sitemap
