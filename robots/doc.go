// Package robots decides what Breakwater may fetch on a host according to
// its robots.txt, with the semantics of RFC 9309. It owns fetching
// robots.txt (through a caller-supplied Getter), interpreting the HTTP
// outcome, matching paths, and the byte encoding used to cache the result;
// storing those bytes and choosing when to refetch belong to the caller.
//
// # Outcomes
//
//   - 2xx: the body (first MaxBodySize bytes, cut at a line break) is parsed.
//   - 4xx except 429, more than MaxRedirects redirects, a redirect loop, or a
//     redirect without a usable http(s) Location: "unavailable", everything
//     is allowed.
//   - 429, 5xx, other statuses, transport errors: an error wrapping
//     ErrUnavailable and no Rules. The caller must treat the host as fully
//     disallowed and retry later, keeping any previously cached Rules
//     (RFC 9309 §2.4 allows a stale copy while robots.txt is unreachable).
//
// Redirects are resolved with net/url and may cross hosts; the result applies
// to the host originally asked for.
//
// # Matching
//
// Path matching is delegated to github.com/temoto/robotstxt, but this package
// parses the file itself and hands temoto one pre-merged group, because
// temoto alone rejects a whole file over one bad line, matches user agents by
// prefix ("bot" would match "botnet"), and lets the first of two equally long
// rules win. Here:
//   - the group is chosen by exact, case-insensitive product-token match
//     ("Breakwater/1.0" on a User-agent line names "breakwater"); all groups
//     naming the token are merged; otherwise the "*" groups apply; otherwise
//     nothing is disallowed;
//   - the longest matching rule wins (temoto's measure: for wildcard rules
//     the length of the compiled regexp), and Allow wins a tie;
//   - "*" matches any run of bytes, a trailing "$" anchors the end, and every
//     pattern is anchored at the start of the path;
//   - paths and patterns are compared after percent-encoding normalization
//     (unreserved escapes decoded, others upper-cased, non-ASCII encoded);
//   - /robots.txt itself is always allowed;
//   - lines before the first User-agent, unknown keys and malformed values
//     are ignored; Crawl-delay (non-standard) takes the largest valid value,
//     capped at MaxCrawlDelay.
//
// # Concurrency
//
// Rules are immutable after construction apart from an internal cache of
// compiled groups keyed by product token, which is safe for concurrent use.
// Allowed and CrawlDelay may be called from many goroutines at once; the
// first call for a token compiles its group, later calls only look it up.
// Do not modify the exported fields of a Rules once it is shared, and do not
// copy a Rules value (it contains synchronization state); pass *Rules.
//
// Time is injected: FromResponse, Fetch and Expired take now explicitly.
package robots
