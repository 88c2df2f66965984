// Package fetch is where the crawl meets the network: one HTTP client with
// a dial-time address guard (safety.go), per-host connection tracking so
// one host's connections can be closed (conns.go), and capped bodies.
//
// A Fetcher makes single requests and never follows redirects: the caller
// queues a 3xx's Location like any link, so every hop passes through scope,
// robots.txt and politeness. An HTTP error status is data, not an error:
// Response.Err is set only when the exchange itself failed.
//
// Request carries the URL and any headers to add; it is where conditional
// request headers go. Options is where proxies and wire capture will be
// configured: both belong here, beside the dialer they must agree with
// (the address guard checks the address actually dialled).
//
// Time comes from Options.Now, so a test's fake clock stamps Started and
// Duration. A Fetcher is safe for concurrent use.
package fetch
