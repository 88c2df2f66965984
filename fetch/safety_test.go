package fetch

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestBlockedReason(t *testing.T) {
	tests := []struct {
		addr, want string
	}{
		{"127.0.0.1", "loopback"},
		{"127.5.6.7", "loopback"},
		{"::1", "loopback"},
		{"10.1.2.3", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"fc00::1", "private"},
		{"fd12:3456::1", "private"},
		{"169.254.169.254", "link-local"}, // cloud metadata
		{"fe80::1", "link-local"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"0.1.2.3", "this-network"},
		{"224.0.0.1", "multicast"},
		{"ff02::1", "multicast"},
		{"100.64.0.1", "carrier-grade NAT"},
		{"100.127.255.255", "carrier-grade NAT"},
		// Public neighbours of the blocked ranges stay allowed.
		{"100.63.255.255", ""},
		{"100.128.0.0", ""},
		{"172.32.0.1", ""},
		{"93.184.216.34", ""},
		{"2606:2800:220:1::1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			if got := blockedReason(netip.MustParseAddr(tt.addr)); got != tt.want {
				t.Errorf("blockedReason(%s) = %q, want %q", tt.addr, got, tt.want)
			}
		})
	}
}

func TestCheckDialAddress(t *testing.T) {
	tests := []struct {
		name, address string
		wantReason    string // "" means allowed
	}{
		{"public v4", "93.184.216.34:80", ""},
		{"public v6", "[2606:2800:220:1::1]:443", ""},
		{"loopback", "127.0.0.1:8080", "loopback"},
		{"v4-mapped loopback", "[::ffff:127.0.0.1]:80", "loopback"},
		{"v4-mapped private", "[::ffff:10.0.0.1]:80", "private"},
		{"link-local with zone", "[fe80::1%eth0]:80", "link-local"},
		{"not an ip", "example.com:80", "unparsable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkDialAddress("tcp", tt.address, nil)
			if tt.wantReason == "" {
				if err != nil {
					t.Fatalf("checkDialAddress(%s) = %v, want allowed", tt.address, err)
				}
				return
			}
			if !errors.Is(err, ErrBlockedAddress) {
				t.Fatalf("checkDialAddress(%s) = %v, want ErrBlockedAddress", tt.address, err)
			}
			if !strings.Contains(err.Error(), tt.wantReason) {
				t.Errorf("error %q does not say %q", err, tt.wantReason)
			}
		})
	}
}

func TestSafeDialerRefusesLoopbackBeforeConnect(t *testing.T) {
	ln := listenLoopback(t)
	accepted := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if c, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()

	d := NewSafeDialer(time.Second, false)
	_, err := d.DialContext(context.Background(), "tcp", ln.Addr().String())
	var be *BlockedAddressError
	if !errors.As(err, &be) {
		t.Fatalf("dial loopback: err = %v, want *BlockedAddressError", err)
	}
	if be.Reason != "loopback" || be.Addr != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("blocked %s for %q, want 127.0.0.1 for loopback", be.Addr, be.Reason)
	}
	ln.Close() // ends the accept goroutine
	<-done
	select {
	case <-accepted:
		t.Error("the blocked dial reached the listener")
	default:
	}
}

func TestSafeDialerAllowPrivate(t *testing.T) {
	ln := listenLoopback(t)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err := NewSafeDialer(time.Second, true).DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial loopback with allowPrivate: %v", err)
	}
	c.Close()
}

func listenLoopback(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}
