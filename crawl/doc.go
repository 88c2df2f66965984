// Package crawl is the engine: workers that take leased URLs from the
// frontier and carry each down the request path, one function per stage,
// in the order process calls them:
//
//	reservePage (--max-pages)                                   path.go
//	authorise   (robots.txt; scope was checked at enqueue)       path.go
//	admit       (the host's circuit breaker)                     path.go
//	takeToken   (per-host pace, retry budget)                    path.go
//	request     (the page, or robots.txt: fetch.Fetcher)         path.go, robotstxt.go
//	classify    (ok, transient, permanent, throttled, refused)   classify.go
//	record      (breaker outcome; result, retry or requeue)      record.go
//	archived    (--warc: a result's records, or a retry)         archive.go
//
// Every stage that ends the path returns a disposition (give the URL back,
// park the host until T, hold it for a person, defer the URL until T,
// complete it with a result and its links, give the host up), and settle,
// in disposition.go, is the one place a lease ends: it also gives back
// what the stages took and did not use (a breaker ticket, a robots.txt
// attempt, a --max-pages reservation).
//
// A refresh of a stored page (--recrawl-after, recrawl.go) goes down the
// same path: its request is conditional on the page's validators, and
// record keeps the stored page on a 304 and records it gone on a 404 or
// 410. Storage queues a host's refreshes only behind its new URLs.
//
// A sitemap (--sitemaps, sitemaps.go) is queued when its host's robots.txt
// is fetched and goes down the same path as a page; record reads its body
// with the sitemap package instead of the link extractor, and queues the
// URLs it lists.
//
// An open host is never attempted: its lease goes back and the host is
// parked until its rest ends, so the worker takes another host's URL at
// once. Retries go through the frontier's deferred bucket, so no worker
// ever sleeps on a URL. A 429 makes the whole host wait out Retry-After and
// halves its pace; successes win the pace back additively.
//
// The pure building blocks (Backoff, RetryBudget, ParseRetryAfter, Pace,
// Classify) take the time as an argument. A page's title and links come
// from the extract package (extract.ScanHTML), which reads the body as it
// streams; the crawl follows its navigation links. The Engine reads its
// injected clock (Options.Now) once per stage, and hands it to the fetcher.
//
// Engine.Control (control.go) answers the control commands for a running
// crawl, from its live breakers, pace and budget; its manual breaker
// changes are written through the frontier's writer like every other write.
//
// Concurrency: one Engine per database file. Workers share the breaker
// registry and the host table, each guarded by its own mutex; no lock is
// held across a network call.
package crawl
