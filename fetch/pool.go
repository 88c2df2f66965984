package fetch

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// renewAfterFailedHosts is how many hosts' dials may fail on one transport
// before the pool starts a fresh one.
//
// net/http registers every request that finds no idle connection as a
// waiter for one (Transport.idleConnWait), under its host, and takes the
// host's waiters off only when one of its connections goes idle. A host
// whose dials all fail never has one, so its last waiter, with the
// request's context, stays for the transport's life: some 600 bytes for
// every unreachable host the crawl ever tried. The transport offers no way
// to drop them but being dropped itself.
const renewAfterFailedHosts = 1024

// transportPool is the Fetcher's http.Transport, renewed once
// renewAfterFailedHosts hosts' dials have failed on it. Requests in flight
// finish on the transport they started on; its idle connections are
// closed as it is replaced, and those it still serves are closed as they
// come back. A renewal costs the hosts in rotation one new dial each, once
// per renewAfterFailedHosts unreachable hosts. A transportPool is an
// http.RoundTripper safe for concurrent use.
type transportPool struct {
	build      func() *http.Transport // a new transport, its hooks installed
	renewAfter int                    // renewAfterFailedHosts, but in tests

	cur    atomic.Pointer[http.Transport] // read by every request; replaced under mu
	mu     sync.Mutex
	failed map[string]struct{} // addresses whose dials failed on cur
}

func newTransportPool(build func() *http.Transport) *transportPool {
	p := &transportPool{build: build, renewAfter: renewAfterFailedHosts, failed: make(map[string]struct{})}
	p.cur.Store(p.make())
	return p
}

// make builds a transport whose dials report their failures to p.
func (p *transportPool) make() *http.Transport {
	tr := p.build()
	tr.DialContext = p.watch(tr, tr.DialContext)
	tr.DialTLSContext = p.watch(tr, tr.DialTLSContext)
	return tr
}

func (p *transportPool) watch(tr *http.Transport, dial dialFunc) dialFunc {
	if dial == nil {
		return nil
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil && ctx.Err() == nil {
			p.dialFailed(tr, addr)
		}
		return c, err
	}
}

// dialFailed counts a failed dial to addr on tr, and renews the transport
// when enough hosts have failed on it.
func (p *transportPool) dialFailed(tr *http.Transport, addr string) {
	p.mu.Lock()
	if tr != p.cur.Load() {
		p.mu.Unlock()
		return // a retired transport's last dials
	}
	p.failed[addr] = struct{}{}
	if len(p.failed) < p.renewAfter {
		p.mu.Unlock()
		return
	}
	p.cur.Store(p.make())
	p.failed = make(map[string]struct{})
	p.mu.Unlock()
	tr.CloseIdleConnections()
}

func (p *transportPool) current() *http.Transport { return p.cur.Load() }

// RoundTrip sends req on the current transport.
func (p *transportPool) RoundTrip(req *http.Request) (*http.Response, error) {
	return p.current().RoundTrip(req)
}

// CloseIdleConnections closes the current transport's idle connections.
func (p *transportPool) CloseIdleConnections() { p.current().CloseIdleConnections() }
