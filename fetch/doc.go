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
// Plain-http requests made direct go over the fetcher's own HTTP/1.1
// connection pool (h1.go), read and written on the requesting goroutine;
// https, and every request through a proxy, go through net/http's
// Transport (HTTP/2 where the server offers it). Both keep connections
// alive per host:port, cap them at Options.MaxConnsPerHost, and share the
// dial, its guard and its tracking.
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
//   - The address guard checks the target, not the proxy, and the address
//     it checked is the one the request reaches: the target's name is
//     resolved here once (an IP literal is checked as it is), refused with
//     a *BlockedAddressError if any of its addresses is blocked, before the
//     proxy is asked for anything, and the proxy is then asked for that
//     address, never the name, so a name whose DNS answers the proxy
//     differently than us (DNS rebinding) cannot reach a private address.
//     A name that does not resolve here fails. Through an HTTP proxy every
//     target, http and https alike, goes through a CONNECT tunnel to the
//     checked ip:port (RFC 9110 allows an IP there); the fetcher runs TLS
//     inside it under the target's name (SNI and certificate checks) and
//     sends the request with the name in Host, as direct. An absolute-form
//     request cannot be pinned: a proxy sends the origin the Host of the
//     request-target (RFC 9112, 3.2.2), so naming the address would break
//     every virtual host; a proxy that tunnels only to port 443 therefore
//     refuses plain http while the guard is on, and the error says so. A
//     proxy whose rules go by name (allowed domains) sees only addresses.
//     socks5 is handed the checked address; socks5h, whose point is that
//     the proxy resolves the name, is refused (ErrProxyResolvesNames,
//     Proxy.CheckGuard) rather than quietly resolved here. The proxy's own
//     address is allowed even when private: a corporate proxy usually is.
//   - With AllowPrivate nothing is checked, so nothing is pinned: an HTTP
//     proxy gets the name (absolute-form for http, over connections shared
//     by every http target; CONNECT name:port for https), socks5h the name,
//     and socks5 the addresses looked up here.
//   - Connections are tracked, refused and closed per target host. A
//     tunnel (CONNECT or SOCKS5) carries one target, so it is tracked under
//     the target's host key: Refuse is asked when the connection to the
//     proxy completes, before the proxy is asked for the target, and
//     CloseHost closes it, as direct. With AllowPrivate, requests to http
//     targets share the connections to an HTTP proxy with every other
//     host, so those connections are tracked under the proxy's own address
//     and never refused; the requests themselves are tracked under their
//     target instead, and CloseHost ends them (the transport then drops the
//     connection each was using and no other); MaxConnsPerHost is then not
//     applied. Refuse is also asked before each proxied request, so a
//     refused host's request never reaches the proxy. An https:// proxy is
//     offered HTTP/1.1 only (its TLS is done in the dial).
//   - The route is fixed per target: one proxy, or the environment's fixed
//     choice for the target (net/http's reading of HTTPS_PROXY, HTTP_PROXY
//     and NO_PROXY, taken when ParseProxy("env") is called; loopback
//     targets are never proxied), each proxy it names under the rules
//     above for its scheme. Nothing here retries a request through another
//     route: the breaker is per host, not per way out. Within the route, a
//     tunnel is asked for each of the target's checked addresses in turn
//     until one opens, unless the proxy refuses us rather than the address
//     (an answer to CONNECT other than 502, 503 or 504).
//
// Time comes from Options.Now, so a test's fake clock stamps Started and
// Duration. A Fetcher is safe for concurrent use.
package fetch
