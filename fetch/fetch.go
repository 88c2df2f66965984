package fetch

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"

	"breakwater/frontier"
)

// Defaults applied by New to zero Options fields. The crawl's own defaults
// (crawl.DefaultOptions) are built from these.
const (
	DefaultUserAgent            = "Breakwater"
	DefaultTimeout              = 30 * time.Second
	DefaultConnectTimeout       = 10 * time.Second
	DefaultMaxBody        int64 = 10 << 20
	DefaultIdleConns            = 256
	DefaultIdleTimeout          = 5 * time.Second
)

// maxResponseHeaderBytes caps a response's header block: a server sending
// endless headers must not grow our memory. Browsers stop near 256 KiB, so
// no page meant to be seen needs more; net/http's 1 MiB default let a
// megabyte of tiny headers through, parsed into a map of 16 MiB.
const maxResponseHeaderBytes = 256 << 10

// Options configures a Fetcher. The zero value is usable.
type Options struct {
	// UserAgent is sent on every request; "" means DefaultUserAgent.
	UserAgent string
	// Header is sent on every request, after UserAgent (a User-Agent here
	// replaces it on the wire, though robots.txt is still matched against
	// UserAgent); a Request's own Header wins over it. New copies it and
	// drops the names ParseHeader refuses. Nil sends no extra headers.
	Header http.Header
	// Jar, if set, supplies the cookies each request carries and keeps the
	// cookies responses set, redirects included, for as long as it lives
	// (a cookiejar.Jar is memory only); see LoadCookies and NewJar. Nil
	// means cookies are neither sent nor kept.
	Jar http.CookieJar
	// UserCookies, if set, are the cookies the user gave, as given: Jar
	// starts with the same ones (LoadUserCookiesFile loads both) and
	// servers update Jar, never UserCookies. A Request WithoutSecrets
	// leaves out of Jar's cookies those still as the user gave them (the
	// same name and value, and one UserCookies has for the URL), and
	// carries the ones servers set. Nil: WithoutSecrets leaves cookies
	// alone.
	UserCookies http.CookieJar
	// Timeout bounds the whole request, body included; 0 means DefaultTimeout.
	Timeout time.Duration
	// ConnectTimeout bounds the TCP connect and, separately, the TLS
	// handshake; 0 means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// MaxBody is the number of body bytes kept, after decompression;
	// 0 or less means DefaultMaxBody.
	MaxBody int64
	// AllowPrivate permits loopback, private and link-local addresses
	// (tests, intranet crawls). Off, such dials fail with ErrBlockedAddress,
	// and so do requests through a Proxy to such a target; requests through
	// a socks5h Proxy fail with ErrProxyResolvesNames.
	AllowPrivate bool
	// Resolver looks up the names dialled, and proxied targets' names,
	// before the guard checks every address found; nil means
	// net.DefaultResolver.
	Resolver Resolver
	// Proxy, if set, is where requests leave through (see ParseProxy and
	// doc.go, Proxies). Unless AllowPrivate, the target is then checked
	// here, before the proxy is asked, a target name must resolve here for
	// that, and the proxy is asked for the checked address, never the name;
	// the proxy's own address is allowed even when private. Nil means
	// every request is direct, whatever the environment says.
	Proxy *Proxy
	// MaxConnsPerHost caps connections per host:port; 0 means no cap (the
	// politeness layer already bounds concurrency per host). It is not
	// applied behind an HTTP proxy with AllowPrivate, whose connections
	// carrying http targets the transport counts as one host's.
	MaxConnsPerHost int
	// IdleConns caps the idle connections kept for reuse, all hosts
	// together; 0 means DefaultIdleConns. The scheduler takes each
	// host in turn, so a pool smaller than the hosts in rotation evicts
	// every connection before its host comes round again, and each
	// request dials anew (a TLS handshake on https).
	IdleConns int
	// IdleTimeout closes a connection idle that long; 0 means
	// DefaultIdleTimeout. A host in rotation is asked again within
	// its politeness delay; the connections of hosts the crawl is done
	// with should not hold memory until the pool is full.
	IdleTimeout time.Duration
	// Refuse, if set, is asked about every new connection with the frontier
	// host key it was dialled for (see hostKeysFor): true closes it and
	// fails the dial. The crawl refuses hosts whose circuit is open.
	Refuse func(hostKey string) bool
	// Record keeps each exchange as it crossed the connection in
	// Response.Wire, for an archive (SpoolDir, "" for the system's temporary
	// directory, is where a large response's bytes wait). Requests then use HTTP/1.1, and a body
	// cut at MaxBody is still read off the wire up to RecordMax.
	Record bool
	// RecordMax caps the wire bytes kept of one response; 0 or less means
	// DefaultRecordMax.
	RecordMax int64
	// SpoolDir is where recorded responses larger than a few hundred KiB
	// wait for the archive, in files unlinked as soon as they are made;
	// "" means the system's temporary directory.
	SpoolDir string
	// Now is the clock for Response.Started and Duration; nil means time.Now.
	Now func() time.Time

	// connect, set only by tests (export_test.go), replaces the TCP
	// connect to an address the guard has passed.
	connect dialFunc
	// tlsConfig, set only by tests, is the https transport's (a test
	// server's certificate trusted); nil means the system's.
	tlsConfig *tls.Config
}

func (o Options) withDefaults() Options {
	o.Header = extraHeaders(o.Header)
	if j, ok := o.Jar.(*cookiejar.Jar); ok && j == nil {
		o.Jar = nil // a nil *Jar in the interface would panic on first use
	}
	if j, ok := o.UserCookies.(*cookiejar.Jar); ok && j == nil || o.Jar == nil {
		o.UserCookies = nil
	}
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.IdleConns <= 0 {
		o.IdleConns = DefaultIdleConns
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.RecordMax <= 0 {
		o.RecordMax = DefaultRecordMax
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Request is one GET to make. Header adds to (and overrides) the headers
// every request carries, such as User-Agent.
type Request struct {
	URL    string
	Header http.Header
	// WithoutSecrets leaves out the secret headers of Options.Header
	// (IsSecretHeader: Authorization, Cookie, tokens) and the user's own
	// cookies (Options.UserCookies): the request goes to a host the user
	// did not name, as curl drops them on a redirect to another host.
	// Cookies servers set still go where the jar sends them.
	WithoutSecrets bool
	// MaxBody, if positive, replaces Options.MaxBody for this request (a
	// sitemap may be larger than any page); 0 means the Fetcher's.
	MaxBody int64
	// Read, if set, is handed the body as it arrives, decoded and capped at
	// the body limit, once the status and headers are in the Response, so
	// that a page is hashed and read for links without ever being held
	// whole: 32 workers on 10 MiB pages would otherwise hold 320 MB. Read
	// may stop early; Fetch reads the rest itself, for the digest. Body
	// then keeps only the first HeadSize bytes (enough to sniff a type or
	// find a refusal's words). Read is not called when no answer came.
	Read func(r *Response, body io.Reader)
	// KeepHead, with Read, says whether Body keeps the head of a response
	// with this status; nil keeps every head. A page read as it streams
	// needs none: copying each page's head was a tenth of the bytes a
	// crawl allocated.
	KeepHead func(status int) bool
}

// HeadSize is how much of a body a Response keeps when Request.Read reads
// the body as it streams.
const HeadSize = 64 << 10

// Response is the outcome of one Fetch. An HTTP error status is data, not an
// error: Err is set only when the exchange itself failed (dial, TLS, timeout,
// a broken body), and then Status may still be set if headers had arrived.
type Response struct {
	URL         string // the URL requested, as given
	Status      int    // 0 when no response arrived
	Header      http.Header
	ContentType string
	Body        []byte // at most MaxBody bytes, decompressed; with Request.Read, the first HeadSize of them
	Truncated   bool   // the body was longer than MaxBody
	Location    string // Location header resolved to an absolute http(s) URL; "" if none or invalid
	Wire        *Wire  // the exchange as sent and received, with Options.Record; nil without
	Started     time.Time
	Duration    time.Duration
	Err         error

	// The digest of the body as kept (see Digest); digested is false for a
	// Response built by hand, whose Body is all there is.
	length   int64
	sum      [sha256.Size]byte
	digested bool
	streamed bool
}

// Digest returns the length and SHA-256 of the body kept: every byte up to
// the body limit, also when Body holds only its head because Request.Read
// read it as it streamed.
func (r *Response) Digest() (length int64, sum [sha256.Size]byte) {
	if !r.digested {
		return int64(len(r.Body)), sha256.Sum256(r.Body)
	}
	return r.length, r.sum
}

// Release frees what the Response holds outside memory: its recorded
// exchange's spool. Call it once the Response is no longer needed.
func (r *Response) Release() {
	if r != nil {
		r.Wire.Close()
	}
}

// Streamed reports whether Request.Read was handed the body.
func (r *Response) Streamed() bool { return r.streamed }

// Fetcher issues single GET requests without following redirects: the caller
// enqueues a 3xx's Location like any other link, so every hop passes through
// scope, robots and politeness. A Fetcher is safe for concurrent use.
type Fetcher struct {
	opts      Options
	transport *transportPool // https, and every request behind a proxy
	plain     *h1Transport   // direct plain http; nil behind a proxy
	client    *http.Client
	conns     *connTracker
	router    *router // nil without a Proxy
}

// New returns a Fetcher with its own connection pool.
func New(o Options) *Fetcher {
	o = o.withDefaults()
	conns := &connTracker{}
	if o.Refuse != nil {
		conns.refuse = func(host, port string) bool {
			return slices.ContainsFunc(hostKeysFor(host, port), o.Refuse)
		}
	}
	guard := newGuardedDialer(o)
	direct := conns.wrap(guard.DialContext)
	var rt *router
	if o.Proxy != nil && !o.Proxy.direct() {
		rt = newRouter(o, conns, direct)
		rt.lookup = guard.lookup // a proxied target is read as a direct one is
	}
	build := func() *http.Transport {
		tr := &http.Transport{
			Proxy:                  nil, // not the environment's: a Proxy goes through the router
			DialContext:            direct,
			ForceAttemptHTTP2:      true,
			MaxIdleConns:           o.IdleConns,
			MaxIdleConnsPerHost:    idleConnsPerHost(o.MaxConnsPerHost),
			MaxConnsPerHost:        o.MaxConnsPerHost,
			IdleConnTimeout:        o.IdleTimeout,
			TLSHandshakeTimeout:    o.ConnectTimeout,
			ResponseHeaderTimeout:  o.Timeout,
			MaxResponseHeaderBytes: maxResponseHeaderBytes,
			// Fetch asks for gzip and decodes it itself (see decodedBody): the
			// transport would hide the encoded bytes an archive must keep.
			DisableCompression: true,
			TLSClientConfig:    o.tlsConfig,
		}
		if rt != nil {
			rt.install(tr)
		}
		if o.Record {
			recordDials(tr, o.ConnectTimeout)
		}
		return tr
	}
	tr := newTransportPool(build)
	var transport http.RoundTripper = tr
	var plain *h1Transport
	if rt == nil { // behind a proxy, every request is the router's
		dial := direct
		if o.Record {
			dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := direct(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &wireConn{Conn: c}, nil
			}
		}
		plain = newH1Transport(dial, o)
		transport = directPlainHTTP{h1: plain, other: tr}
	}
	return &Fetcher{
		opts:      o,
		transport: tr,
		plain:     plain,
		conns:     conns,
		router:    rt,
		client: &http.Client{
			Transport:     transport,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			// No Jar: Fetch sends and keeps cookies itself, since which of
			// them a request may carry depends on the request.
		},
	}
}

// cookiesFor is the cookies of the jar a request to u carries; without
// the user's, those still as UserCookies has them for u are left out.
func (f *Fetcher) cookiesFor(u *url.URL, withoutUser bool) []*http.Cookie {
	cookies := f.opts.Jar.Cookies(u)
	if !withoutUser || f.opts.UserCookies == nil || len(cookies) == 0 {
		return cookies
	}
	given := f.opts.UserCookies.Cookies(u)
	return slices.DeleteFunc(cookies, func(c *http.Cookie) bool {
		return slices.ContainsFunc(given, func(g *http.Cookie) bool { return g.Name == c.Name && g.Value == c.Value })
	})
}

// idleConnsPerHost keeps as many idle connections as a host may have busy
// ones, so a polite worker pool reuses instead of redialling.
func idleConnsPerHost(maxConns int) int {
	if maxConns > 0 {
		return maxConns
	}
	return 4
}

// Get is Fetch of a plain GET of rawURL.
func (f *Fetcher) Get(ctx context.Context, rawURL string) *Response {
	return f.Fetch(ctx, Request{URL: rawURL})
}

// Fetch makes one request. It never returns nil and never panics on hostile
// input: the body is capped at MaxBody (the Request's, else the Options')
// and the whole exchange at Timeout.
func (f *Fetcher) Fetch(ctx context.Context, in Request) *Response {
	rawURL := in.URL
	r := &Response{URL: rawURL, Started: f.opts.Now()}
	defer func() { r.Duration = f.opts.Now().Sub(r.Started) }()

	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		r.Err = fmt.Errorf("new request: %w", err)
		return r
	}
	req.Header.Set("User-Agent", f.opts.UserAgent)
	for name, values := range f.opts.Header { // canonical names, see extraHeaders
		if in.WithoutSecrets && IsSecretHeader(name) {
			continue
		}
		req.Header[name] = values
	}
	for name, values := range in.Header {
		req.Header[http.CanonicalHeaderKey(name)] = values
	}
	if req.Header.Get("Accept-Encoding") == "" {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	if f.opts.Jar != nil {
		for _, c := range f.cookiesFor(req.URL, in.WithoutSecrets) {
			req.AddCookie(c)
		}
	}
	if f.router != nil {
		var rt *route
		req, rt = f.router.begin(req)
		defer f.router.end(rt) // after the body is read
	}
	var capt *capture
	if f.opts.Record {
		capt = &capture{wire: newWire(f.opts.RecordMax, f.opts.SpoolDir)}
		req = capt.traced(req)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		r.Err = err // a *url.Error already names the method and URL
		if capt != nil {
			capt.finish(nil, false)
		}
		return r
	}
	defer resp.Body.Close() // unread rest: the transport drops the connection
	if f.opts.Jar != nil {
		// As http.Client keeps them: a 3xx's too, since none is followed.
		if set := resp.Cookies(); len(set) > 0 {
			f.opts.Jar.SetCookies(req.URL, set)
		}
	}
	r.Status, r.Header = resp.StatusCode, resp.Header
	r.ContentType = resp.Header.Get("Content-Type")
	if loc := resp.Header.Get("Location"); loc != "" {
		r.Location, _ = frontier.Resolve(rawURL, loc) // invalid stays ""
	}
	limit := f.opts.MaxBody
	if in.MaxBody > 0 {
		limit = in.MaxBody
	}
	var raw io.Reader = resp.Body
	var tee *rawTee
	if capt != nil {
		tee = &rawTee{r: resp.Body}
		raw = tee
	}
	body, sizeHint := decodedBody(raw, resp)
	if in.Read != nil {
		keep := in.KeepHead == nil || in.KeepHead(r.Status)
		r.Truncated, err = stream(r, body, limit, sizeHint, keep, in.Read)
	} else {
		r.Body, r.Truncated, err = readCapped(body, limit, sizeHint)
		r.length, r.sum, r.digested = int64(len(r.Body)), sha256.Sum256(r.Body), true
	}
	if lz, ok := body.(*lazyGzip); ok {
		lz.release()
	}
	if err != nil {
		r.Err = fmt.Errorf("read body of %s: %w", rawURL, err)
	}
	if capt != nil {
		done := err == nil && !r.Truncated
		switch {
		case err == nil && r.Truncated:
			done = drain(raw, capt, f.opts.RecordMax)
		case err != nil && tee.err == io.EOF:
			done = true // the body was all read; only its decoding failed
		case err != nil && tee.err == nil:
			// The decoding failed (a broken gzip body), not the exchange:
			// the archive keeps what the server sent, to its end.
			done = drain(raw, capt, f.opts.RecordMax)
		}
		r.Wire = capt.finish(resp, done)
	}
	return r
}

// decodedBody returns the body to read for links and digests: a gzip body
// decoded (Fetch asks for gzip, so it decodes it, as the transport would
// have), any other as sent. The size hint is the declared length when the
// bytes are not decoded, -1 otherwise.
func decodedBody(raw io.Reader, resp *http.Response) (io.Reader, int64) {
	switch strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))) {
	case "gzip", "x-gzip":
		return &lazyGzip{src: raw}, -1
	}
	return raw, resp.ContentLength
}

// lazyGzip opens the gzip stream on the first read, so a bad header is a
// read error like any broken body. Its decoder comes from gunzips and goes
// back with release: a new one a page (its 32 KiB window, its tables, the
// 4 KiB buffer it reads through) cost more than decoding most pages.
type lazyGzip struct {
	src io.Reader
	dec *gunzip
}

// gunzip is a gzip decoder and the buffered reader it reads the body
// through (it needs a ByteReader; the buffer reads ahead of it only bytes
// of the same body, which a capture of the raw bytes sees in order).
type gunzip struct {
	zr  gzip.Reader
	buf *bufio.Reader
}

var gunzips sync.Pool

func (g *lazyGzip) Read(p []byte) (int, error) {
	if g.dec == nil {
		dec, _ := gunzips.Get().(*gunzip)
		if dec == nil {
			dec = &gunzip{buf: bufio.NewReaderSize(nil, 4<<10)}
		}
		dec.buf.Reset(g.src)
		g.dec = dec
		if err := dec.zr.Reset(dec.buf); err != nil {
			return 0, fmt.Errorf("gzip body: %w", err)
		}
	}
	return g.dec.zr.Read(p)
}

// release hands the decoder back once the body is read; the body reads
// nothing after.
func (g *lazyGzip) release() {
	if g.dec == nil {
		return
	}
	g.dec.buf.Reset(nil) // hold on to no body in the pool
	gunzips.Put(g.dec)
	g.dec, g.src = nil, eofReader{}
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// drain reads the rest of a body cut at MaxBody, for the archive, until
// its end (reported true), the record cap, or a failure: the page is
// already read, so a failure here only leaves the record truncated.
func drain(raw io.Reader, c *capture, limit int64) bool {
	buf := make([]byte, 32<<10)
	for read := int64(0); read < limit && !c.full(); {
		n, err := raw.Read(buf)
		read += int64(n)
		if err == io.EOF {
			return true
		}
		if err != nil {
			return false
		}
	}
	return false
}

// CloseIdle closes the idle connections of every host.
func (f *Fetcher) CloseIdle() {
	f.transport.CloseIdleConnections()
	if f.plain != nil {
		f.plain.closeIdle()
	}
}

// CloseHost closes every connection to host (a frontier host key), idle or
// in use, and leaves other hosts' connections in the pool. It is for a host
// whose circuit has just opened: no request to it may start, and those in
// flight have been cut short. A connection still being dialled is Refuse's
// to close. Behind an HTTP proxy, the host's tunnels are its connections;
// its http requests share the proxy's connections with other hosts, so
// those requests are ended instead, with an error wrapping ErrHostRefused.
func (f *Fetcher) CloseHost(host string) { f.conns.closeHost(host) }

// Close releases idle connections. In-flight fetches are not interrupted.
func (f *Fetcher) Close() { f.CloseIdle() }

// stream hands body, capped at limit, to read, hashing it and keeping its
// head in r as it goes (if keepHead), then reads what read left. It reports whether the
// body was longer than limit, and the body's read error, if any. A
// declared length (sizeHint, -1 if unknown) sizes the head up front: grown
// read by read, a 30 KB page's head took eight allocations.
func stream(r *Response, body io.Reader, limit, sizeHint int64, keepHead bool, read func(*Response, io.Reader)) (truncated bool, err error) {
	h := bodyHashes.Get().(hash.Hash)
	defer bodyHashes.Put(h)
	h.Reset()
	s := &bodyStream{src: body, left: limit, hash: h, r: r, keepHead: keepHead}
	if keepHead && sizeHint > 0 && r.Body == nil {
		r.Body = make([]byte, 0, min(sizeHint, limit, HeadSize))
	}
	r.streamed = true
	read(r, s)
	if s.err == nil {
		buf := streamBufs.Get().(*[]byte)
		_, _ = io.CopyBuffer(io.Discard, onlyReader{s}, *buf)
		streamBufs.Put(buf)
	}
	if s.err == nil && s.left == 0 {
		// At the limit: one byte more says whether there was more.
		var one [1]byte
		n, perr := io.ReadFull(body, one[:])
		truncated = n > 0
		if perr != nil && perr != io.EOF && perr != io.ErrUnexpectedEOF {
			s.err = perr
		}
	}
	r.length, r.digested = s.read, true
	s.hash.Sum(r.sum[:0])
	if s.err == io.EOF {
		s.err = nil
	}
	return truncated, s.err
}

var streamBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// bodyHashes are the bodies' SHA-256 states: a new one a fetch was 2% of a
// crawl's CPU.
var bodyHashes = sync.Pool{New: func() any { return sha256.New() }}

// bodyStream is a body on its way to Request.Read: capped, hashed, its
// head kept, its first failure remembered.
type bodyStream struct {
	src  io.Reader
	left int64 // bytes the cap still allows
	read int64
	hash hash.Hash
	r    *Response
	err  error // the first error of src, io.EOF at its end
	// keepHead: r.Body keeps the first HeadSize bytes.
	keepHead bool
}

func (s *bodyStream) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	n, err := s.src.Read(p)
	if n > 0 {
		s.left -= int64(n)
		s.read += int64(n)
		s.hash.Write(p[:n])
		if room := HeadSize - len(s.r.Body); room > 0 && s.keepHead {
			s.r.Body = append(s.r.Body, p[:min(n, room)]...)
		}
	}
	if err != nil {
		s.err = err
	}
	return n, err
}

// onlyReader hides a reader's other methods from io.Copy.
type onlyReader struct{ io.Reader }

// readCapped reads at most limit bytes. It asks for one byte more to learn
// whether the body was longer, without reading the rest.
// A declared length (sizeHint, -1 if unknown) sizes the buffer up front, so
// a typical page is read into one allocation; it is only a hint, capped at
// the limit, since servers lie about it.
func readCapped(r io.Reader, limit, sizeHint int64) (body []byte, truncated bool, err error) {
	var buf bytes.Buffer
	if sizeHint > 0 {
		buf.Grow(int(min(sizeHint, limit) + bytes.MinRead))
	}
	_, err = buf.ReadFrom(io.LimitReader(r, limit+1))
	body = buf.Bytes()
	if int64(len(body)) > limit {
		return body[:limit], true, err
	}
	return body, false, err
}
