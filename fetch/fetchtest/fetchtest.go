// Package fetchtest has the hostile loopback servers that the fetcher's
// tests and the classifier's tests both need: behaviour net/http's own
// server will not produce (resets, silence, broken framing); and a forward
// HTTP proxy and a SOCKS5 proxy on loopback, for tests of crawls through
// a proxy.
package fetchtest

import (
	"bufio"
	"net"
	"sync"
	"testing"
)

// RawServer serves each connection on a loopback listener with handle.
// The listener and every connection are closed at cleanup.
func RawServer(tb testing.TB, handle func(c net.Conn)) (addr string) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen: %v", err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { handle(c) })
		}
	})
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// ReadRequestHead consumes a request's header block so that the client is
// waiting for the response when the handler misbehaves.
func ReadRequestHead(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil || line == "\r\n" {
			return
		}
	}
}
