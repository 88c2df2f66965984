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

// Every kind of address the guard refuses, its IPv4-mapped form where it
// has one, and the public neighbours of each range, which stay allowed.
func TestBlockedReason(t *testing.T) {
	tests := []struct {
		addr, want string
	}{
		{"127.0.0.1", "loopback"},
		{"127.5.6.7", "loopback"},
		{"127.255.255.255", "loopback"},
		{"::1", "loopback"},
		{"10.0.0.0", "private"},
		{"10.1.2.3", "private"},
		{"10.255.255.255", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.0.0", "private"},
		{"192.168.255.255", "private"},
		{"fc00::1", "private"},
		{"fd12:3456::1", "private"},
		{"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "private"},
		{"169.254.0.1", "link-local"},
		{"169.254.169.254", "link-local"}, // cloud metadata
		{"fe80::1", "link-local"},
		{"febf:ffff::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"fec0::1", "site-local"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"0.1.2.3", "this-network"},
		{"0.255.255.255", "this-network"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"ff0e::1", "multicast"},
		{"100.64.0.1", "carrier-grade NAT"},
		{"100.127.255.255", "carrier-grade NAT"},
		{"255.255.255.255", "broadcast"},
		{"240.0.0.1", "reserved"},
		{"255.255.255.254", "reserved"},
		// IPv4-mapped: the same on the wire as the IPv4 address.
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:10.0.0.1", "private"},
		{"::ffff:172.16.0.1", "private"},
		{"::ffff:192.168.1.1", "private"},
		{"::ffff:169.254.169.254", "link-local"},
		{"::ffff:0.0.0.0", "unspecified"},
		{"::ffff:0.1.2.3", "this-network"},
		{"::ffff:224.0.0.1", "multicast"},
		{"::ffff:100.64.0.1", "carrier-grade NAT"},
		{"::ffff:255.255.255.255", "broadcast"},
		// Other IPv6 forms that carry an IPv4 address somewhere reaches.
		{"::127.0.0.1", "IPv4-compatible"},
		{"::8.8.8.8", "IPv4-compatible"},
		{"64:ff9b::127.0.0.1", "loopback via NAT64"},
		{"64:ff9b::10.0.0.1", "private via NAT64"},
		{"64:ff9b::169.254.169.254", "link-local via NAT64"},
		{"64:ff9b:1::a00:1", "local-use NAT64"},
		{"::ffff:0:192.168.0.1", "private via IPv4-translated"},
		{"2002:7f00:1::", "loopback via 6to4"},
		{"2002:a9fe:a9fe::1", "link-local via 6to4"},
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback via Teredo"}, // client 127.0.0.1, inverted
		// Public neighbours of the blocked ranges stay allowed.
		{"1.0.0.1", ""},
		{"9.255.255.255", ""},
		{"11.0.0.0", ""},
		{"100.63.255.255", ""},
		{"100.128.0.0", ""},
		{"126.255.255.255", ""},
		{"128.0.0.0", ""},
		{"169.253.255.255", ""},
		{"169.255.0.0", ""},
		{"172.15.255.255", ""},
		{"172.32.0.1", ""},
		{"192.167.255.255", ""},
		{"192.169.0.0", ""},
		{"223.255.255.255", ""},
		{"93.184.216.34", ""},
		{"::ffff:93.184.216.34", ""},
		{"2606:2800:220:1::1", ""},
		{"fbff::1", ""},
		{"64:ff9b::8.8.8.8", ""},
		{"2002:808:808::1", ""},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", ""}, // Teredo client 192.0.2.45
		{"2001:4860:4860::8888", ""},
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
