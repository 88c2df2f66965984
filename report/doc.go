// Package report owns the site audit a finished or running crawl is read
// into: what is broken and where it is linked from, redirect chains and
// loops, what pages say to search engines (noindex, canonicals),
// duplicates, the slowest pages, what the crawl held back (robots.txt,
// trap rules), and charts of statuses, response times, depths and the
// breaker timeline. It builds the data model (Build) and renders it as
// one self-contained HTML file (WriteHTML), as JSON (WriteJSON, the same
// model) or as one CSV file per table (WriteCSV).
//
// Build reads a crawl through Source, which control.API satisfies, so a
// report works on a file, on a running crawl's control socket and on a
// fleet's store alike. Results are streamed, never held: the model keeps
// fixed-size tallies and histograms, a min-heap of the slowest pages, the
// redirects (URL -> status and location, redirects only), one counter per
// distinct sha256 and per distinct title of a 2xx page (about 40 bytes a
// page, for the duplicate tables), and per-finding tables capped by Caps
// (a table past its cap says how many more it left out). Results are read
// twice, and a third time when chains, canonicals or duplicates need the
// URLs or statuses the first pass only counted; a running crawl may commit
// between the passes, so a count and its listed rows may differ by what
// was committed meanwhile.
//
// Where the referrers of a broken URL come from is a Graph: every page
// linking to it with its anchor text when the crawl kept its link graph,
// or else the first page each URL was found on (ReferrerGraph). What a
// page says about itself (meta robots, canonical) comes from a
// DirectivesFunc; without one those sections are empty and say so.
//
// The HTML is made by html/template, so text from the crawled pages
// (titles, anchor text, URLs) is escaped wherever it lands, the SVG
// charts included; it holds no script and loads nothing.
package report
