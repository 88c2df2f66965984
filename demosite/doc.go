// Package demosite serves a local multi-host web site on loopback for the
// crawler's demo command, its end-to-end tests and its benchmark. The machines
// running Breakwater have no internet, so every "host" the crawler meets in a
// demo is one of these: its own http.Server (or raw listener) on
// 127.0.0.1:PORT, so the crawler sees distinct hosts.
//
// # Basics
//
// Start takes one HostSpec per host and a SiteOptions. A host with Pages=N
// serves "/" and "/p/1" … "/p/N-1" as small HTML pages (about 3 KB) that link
// to other pages of the same host, to pages of other hosts and, when
// SiteOptions.DeadLinksPerPage is set, to URLs on dead hosts. Some pages carry
// noise links (a #fragment, an empty query "?", a mailto:, a "../" link) that
// canonicalize to pages already linked elsewhere, so a good crawler fetches
// each page exactly once. Unknown paths answer 404 and /robots.txt serves
// HostSpec.Robots (404 when empty).
//
// Each host misbehaves according to its Behavior (Healthy, Dead, Recovering,
// Refusing, Flaky, Throttling); the behavior applies to every path, robots.txt
// included, because that is what a real failing host does. Every request is
// logged per host (Host.Requests); a dead host logs one entry per accepted
// connection, with an empty path and status 0. Host.BodyBytes counts the
// body bytes a host has sent.
//
// Pages send an ETag and a Last-Modified and answer a conditional GET whose
// copy is current with 304 and no body. Host.Change gives pages a new
// revision (new text, new validators), so a test can change a site between
// two crawls.
//
// Single-purpose sites stand beside it. StartTraps serves the traps of
// hostile servers (endless calendars, redirect loops, garbage, huge
// attributes). StartCalendar serves a small site whose events calendar,
// /calendar/YYYY/MM, links each month to the next and the one before, for
// ever: what a crawl at default settings must end on. StartRequisites serves two pages made of every kind of page
// requisite (a chunked stylesheet importing another with a font and
// background images, a gzip-encoded script, srcset and picture images, a
// poster, style url()s, frames, a favicon) and an out-of-scope second
// host with an image, a frame and pages only linked to; it lists every
// requisite URL and counts every request, so a test can check that each is
// fetched once, archived, and shown by a replay tool in a browser.
//
// # Invariants
//
//   - Pages and links are a pure function of the specs, the options, the
//     Seed and the pages' revisions: two sites started alike serve the same
//     pages, apart from ports (and Last-Modified, the time each started).
//   - Every page of a host is reachable from its "/" through same-host links
//     (page i always links to page i+1 mod N).
//   - Pages are rendered per request into pooled buffers rather than
//     pre-rendered, so 800 hosts x 60 pages start in milliseconds.
//   - Behaviors that depend on time (Recovering, Throttling) read
//     SiteOptions.Now, never the wall clock directly, so tests inject a clock.
//
// # Concurrency
//
// A Site is safe for concurrent use once Start returns; its link structure is
// immutable. Each Host guards its request log and its behavior state (flaky
// RNG, throttle window) with its own mutexes. Close stops every server, closes
// every held dead-host connection and waits for every goroutine the site
// started, so no goroutine outlives Close.
package demosite
