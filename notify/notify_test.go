package notify

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestNilNotifierDropsEverything(t *testing.T) {
	var n *Notifier
	n.Send("case", nil)
	n.Close(context.Background())
}

// A webhook that hangs never blocks Send: the queue takes what it can and
// the rest is dropped, and Close gives up when its context ends.
func TestSendNeverBlocks(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	n := New(srv.URL, "c.db", Options{Queue: 2, Attempts: 1, Timeout: time.Minute, Logger: slog.New(slog.DiscardHandler)})
	start := time.Now()
	for range 100 {
		n.Send("case", map[string]any{"host": "a"})
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("100 sends to a hung webhook took %s", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	n.Close(ctx)
	if ctx.Err() == nil {
		t.Fatal("Close returned before its context ended, with a hung delivery")
	}
}

func TestParseURL(t *testing.T) {
	for raw, ok := range map[string]bool{"http://127.0.0.1:9/x": true, "https://hooks.example/a": true,
		"ftp://x/": false, "127.0.0.1:9": false, "http://": false} {
		if _, err := ParseURL(raw); (err == nil) != ok {
			t.Errorf("ParseURL(%q) = %v, want ok %v", raw, err, ok)
		}
	}
}
