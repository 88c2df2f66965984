package fetch

import (
	"context"
	"net"
)

// WithConnect returns o with every TCP connect to an address the guard has
// passed made by connect instead, so that a test outside the package can
// serve a public-looking address from loopback.
func WithConnect(o Options, connect func(ctx context.Context, network, addr string) (net.Conn, error)) Options {
	o.connect = connect
	return o
}
