package cli

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
)

// --listen with a port alone binds loopback, not every interface; a host
// other than loopback is bound as named, with a warning that the page is
// exposed; an address without a port is a usage error.
func TestListenStatusAddress(t *testing.T) {
	for _, tt := range []struct {
		addr     string
		loopback bool // bound to 127.0.0.1; else to the unspecified address
		warn     bool
	}{
		{":0", true, false},
		{"127.0.0.1:0", true, false},
		{"0.0.0.0:0", false, true},
	} {
		t.Run(tt.addr, func(t *testing.T) {
			var logs bytes.Buffer
			ln, err := listenStatus(tt.addr, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatalf("listenStatus(%q): %v", tt.addr, err)
			}
			ip := ln.Addr().(*net.TCPAddr).IP
			ln.Close() // before anything could reach it
			if tt.loopback && !ip.Equal(net.IPv4(127, 0, 0, 1)) || !tt.loopback && !ip.IsUnspecified() {
				t.Errorf("listenStatus(%q) bound %s", tt.addr, ip)
			}
			if warned := strings.Contains(logs.String(), "exposed beyond this machine"); warned != tt.warn {
				t.Errorf("listenStatus(%q): warned %v, want %v (log %q)", tt.addr, warned, tt.warn, logs.String())
			}
		})
	}
	_, err := listenStatus("9150", nil)
	var usage usageError
	if !errors.As(err, &usage) || !strings.Contains(err.Error(), "--listen 9150") {
		t.Errorf("listenStatus(9150) = %v, want a usage error naming it", err)
	}
}
