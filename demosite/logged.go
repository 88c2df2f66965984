package demosite

import (
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"sync"
	"time"
)

// loggedServer is one loopback host that counts the request targets it
// is asked for, so that a test can say what a crawl fetched and how often.
type loggedServer struct {
	srv  *http.Server
	base string
	done chan struct{}

	mu  sync.Mutex
	log map[string]int
}

// startLogged serves handler on a fresh loopback port until Close; name
// says which site, in an error.
func startLogged(name string, handler http.HandlerFunc) (*loggedServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("%s: listen: %w", name, err)
	}
	s := &loggedServer{base: "http://" + ln.Addr().String(), done: make(chan struct{}), log: map[string]int{}}
	s.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			s.log[r.RequestURI]++
			s.mu.Unlock()
			handler(w, r)
		})}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // ErrServerClosed after Close
	}()
	return s, nil
}

// URL returns the absolute URL of path on the host.
func (s *loggedServer) URL(path string) string { return s.base + path }

// Requests returns how many times each request target ("/calendar?month=2")
// was asked for.
func (s *loggedServer) Requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.log)
}

// Close stops the server, drops its connections and waits for it.
func (s *loggedServer) Close() error {
	err := s.srv.Close()
	<-s.done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
