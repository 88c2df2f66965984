package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
)

// connTracker remembers the open connections of a Fetcher by the host and
// port they were dialled for, so that one host's can be closed: net/http
// closes idle connections only all at once, and with a pool sized for
// hundreds of hosts that is hundreds of redials for one host's sake.
// Behind an HTTP proxy it also holds the requests to each host that share
// the proxy's connections with other hosts (see route), for closeHost to
// end.
type connTracker struct {
	mu     sync.Mutex
	byHost map[string]map[tracked]struct{} // by lower-case host name
	// refuse, if set, is asked about every new connection once it is
	// tracked: a connection to a refused host is closed and its dial fails.
	refuse func(host, port string) bool
}

// tracked is what closeHost can end for a host: a connection, or a
// request through a connection other hosts share.
type tracked interface {
	hostPort() (host, port string) // lower-case host, as dialled or requested
	Close() error
}

// ErrHostRefused fails a dial that completed for a host the fetcher no
// longer talks to (its circuit is open), a request to such a host through
// a proxy, and a proxied request CloseHost ended.
var ErrHostRefused = errors.New("host refused by its circuit breaker")

// trackedConn leaves its tracker when closed, whoever closes it.
type trackedConn struct {
	net.Conn
	tracker    *connTracker
	host, port string
	once       sync.Once
}

func (c *trackedConn) hostPort() (string, string) { return c.host, c.port }

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.tracker.forget(c) })
	return c.Conn.Close()
}

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// wrap returns dial with every connection it makes tracked under addr.
func (t *connTracker) wrap(dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil { // the transport always dials host:port
			return c, nil
		}
		return t.track(c, host, port, true)
	}
}

// track tracks c under host and port. If ask is set and Refuse refuses
// the host, c is closed and the error wraps ErrHostRefused.
func (t *connTracker) track(c net.Conn, host, port string, ask bool) (net.Conn, error) {
	tc := &trackedConn{Conn: c, tracker: t, host: strings.ToLower(host), port: port}
	t.add(tc)
	// Asked after the connection is tracked: a closeHost from now on
	// closes it, and one that came before it shows as a refusal here.
	if ask && t.refused(tc.host, port) {
		tc.Close()
		return nil, fmt.Errorf("dial %s: %w", net.JoinHostPort(host, port), ErrHostRefused)
	}
	return tc, nil
}

// refused reports whether Refuse refuses host (lower-case) and port.
func (t *connTracker) refused(host, port string) bool {
	return t.refuse != nil && t.refuse(host, port)
}

func (t *connTracker) add(c tracked) {
	host, _ := c.hostPort()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byHost == nil {
		t.byHost = make(map[string]map[tracked]struct{})
	}
	set := t.byHost[host]
	if set == nil {
		set = make(map[tracked]struct{})
		t.byHost[host] = set
	}
	set[c] = struct{}{}
}

func (t *connTracker) forget(c tracked) {
	host, _ := c.hostPort()
	t.mu.Lock()
	defer t.mu.Unlock()
	if set := t.byHost[host]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(t.byHost, host)
		}
	}
}

// closeHost closes every connection dialled for hostKey, a frontier host
// key: "host:port", or a bare host for the default ports 80 and 443, and
// ends its tracked requests. It returns how many it closed.
func (t *connTracker) closeHost(hostKey string) int {
	host, port := splitHostKey(hostKey)
	var doomed []tracked
	t.mu.Lock()
	for c := range t.byHost[host] {
		if _, p := c.hostPort(); port == p || port == "" && isDefaultPort(p) {
			doomed = append(doomed, c)
		}
	}
	t.mu.Unlock()
	for _, c := range doomed {
		c.Close()
	}
	return len(doomed)
}

// open counts the tracked connections and requests.
func (t *connTracker) open() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, set := range t.byHost {
		n += len(set)
	}
	return n
}

// splitHostKey splits a frontier host key into its lower-case host name
// (IPv6 without brackets) and port, "" for a default port.
func splitHostKey(key string) (host, port string) {
	if h, p, err := net.SplitHostPort(key); err == nil {
		return strings.ToLower(h), p
	}
	return strings.ToLower(strings.Trim(key, "[]")), ""
}

// hostKeysFor lists the frontier host keys a connection to host and port
// may serve: "host:port", and the bare host too on a default port (the key
// drops the scheme's default port, and the dialler does not know the scheme).
func hostKeysFor(host, port string) []string {
	keys := []string{net.JoinHostPort(host, port)}
	if isDefaultPort(port) {
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		keys = append(keys, host)
	}
	return keys
}

func isDefaultPort(port string) bool { return port == "80" || port == "443" }
