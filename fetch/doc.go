// Package fetch is where the crawl meets the network: one HTTP client with
// a dial-time address guard (safety.go), per-host connection tracking so
// one host's connections can be closed (conns.go), proxies that keep both
// (proxy.go, route.go), extra headers (header.go), cookies (cookies.go),
// and capped bodies.
//
// A Fetcher makes single requests and never follows redirects: the caller
// queues a 3xx's Location like any link, so every hop passes through scope,
// robots.txt and politeness. An HTTP error status is data, not an error:
// Response.Err is set only when the exchange itself failed.
//
// Request carries the URL and any headers to add; it is where conditional
// request headers go. Options.Header is added to every request, before a
// Request's own. Options.Jar, when set, is the run's cookies: loaded from a
// cookies.txt (LoadCookies), sent where they match, and updated by every
// response, a 3xx's included. Without a Jar no cookie is sent or kept.
// Fetch sends and keeps the cookies itself rather than leave the jar to
// http.Client, because a Request WithoutSecrets (to a host the user did
// not name) must leave out the secret headers and the user's own cookies
// while still carrying those servers set: Options.UserCookies is the
// user's cookies as loaded (LoadUserCookiesFile loads the two jars), and
// such a request leaves out those of Jar's cookies still as the user gave
// them. One jar, rather than one for the file and one for servers, keeps
// a server's update or removal of a user's cookie in effect everywhere.
//
// # Proxies
//
// A direct request resolves its host here, through Options.Resolver (nil:
// net.DefaultResolver), and is refused with a *BlockedAddressError if any
// address the name has is blocked, not only the one it would connect to; a
// host that spells an IPv4 address oddly (2130706433, 0x7f.1, 127.1) is
// read as that address, as the URL standard says, and never sent to DNS.
// Each connect is checked again as it is made.
//
// Without Options.Proxy every request is direct and the environment is
// ignored. With one, the rules that hold direct still hold:
//
//   - The address guard checks the target, not the proxy. A direct dial
//     checks the address it connects to; behind a proxy that address is
//     the proxy's, so the target's host is resolved here first (an IP
//     literal is checked as it is) and refused with a *BlockedAddressError
//     if any of its addresses is blocked, before the proxy is asked for
//     anything; a name that does not resolve here fails. The proxy's own
//     address is allowed even when private: a corporate proxy usually is.
//     With socks5 the proxy is handed the checked addresses; an HTTP
//     proxy, or socks5h, resolves the name again itself, so a name whose
//     DNS answers the proxy differently than us is not covered.
//   - Connections are tracked, refused and closed per target host. A
//     CONNECT tunnel and a SOCKS5 connection carry one target, so they are
//     tracked under the target's host key: Refuse is asked when one
//     completes and CloseHost closes it, as direct. Requests to http
//     targets share the connections to an HTTP proxy with every other
//     host, so those connections are tracked under the proxy's own address
//     and never refused; the requests themselves are tracked under their
//     target instead, and CloseHost ends them (the transport then drops the
//     connection each was using and no other). Refuse is also asked before
//     each proxied request, so a refused host's request never reaches the
//     proxy. MaxConnsPerHost is not applied behind an HTTP proxy, and an
//     https:// proxy is offered HTTP/1.1 only (its TLS is done in the dial:
//     the transport would offer it h2, then speak HTTP/1.1).
//   - The route is fixed per target: one proxy, or the environment's fixed
//     choice for the target (net/http's reading of HTTPS_PROXY, HTTP_PROXY
//     and NO_PROXY, taken when ParseProxy("env") is called; loopback
//     targets are never proxied). Nothing here retries a request through
//     another route: the breaker is per host, not per way out.
//
// Time comes from Options.Now, so a test's fake clock stamps Started and
// Duration. A Fetcher is safe for concurrent use.
package fetch
