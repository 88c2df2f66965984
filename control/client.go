package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"breakwater/store"
)

// Client answers the API by forwarding each call to the crawl serving a
// control socket, one connection a call. Errors come back as their text.
type Client struct {
	path string
}

var _ API = (*Client)(nil)

// NewClient returns a Client of the socket at path (see SocketPath). It
// connects only when called; a call finding nobody returns ErrNoServer.
func NewClient(path string) *Client { return &Client{path: path} }

// forward sends cmd with a to the server and returns its answer.
func forward[R any](c *Client, cmd command[R], a Args) (R, error) {
	var out R
	err := call(c.path, cmd.name, a, &out)
	return out, err
}

// Status asks the crawl for its counters.
func (c *Client) Status() (*Status, error) { return forward(c, cmdStatus, Args{}) }

// Hosts asks the crawl for its host rows.
func (c *Client) Hosts(state string) ([]HostRow, error) {
	return forward(c, cmdHosts, Args{State: state})
}

// Transitions asks the crawl for its logged transitions.
func (c *Client) Transitions(host string, since time.Time) ([]store.Transition, error) {
	return forward(c, cmdTrans, Args{Host: host, Since: since})
}

// Cases asks the crawl for its recorded refusals.
func (c *Client) Cases() ([]store.Case, error) { return forward(c, cmdCases, Args{}) }

// Pause asks the crawl to pause host.
func (c *Client) Pause(host, reason string) error {
	_, err := forward(c, cmdPause, Args{Host: host, Reason: reason})
	return err
}

// Unpause asks the crawl to unpause host.
func (c *Client) Unpause(host string) error {
	_, err := forward(c, cmdUnpause, Args{Host: host})
	return err
}

// ResolveCase asks the crawl to resolve host's case.
func (c *Client) ResolveCase(host string) error {
	_, err := forward(c, cmdResolve, Args{Host: host})
	return err
}

// Results asks the crawl for its results, streamed one a line.
func (c *Client) Results(failedOnly bool, fn func(*store.Result) error) error {
	return stream(c.path, cmdResults, Args{Failed: failedOnly}, func(line json.RawMessage) error {
		var r store.Result
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("control results: decode a result: %w", err)
		}
		return fn(&r)
	})
}

// Edges asks the crawl for its link graph, streamed one link a line.
func (c *Client) Edges(fn func(store.Edge) error) error {
	return stream(c.path, cmdEdges, Args{}, edgeLines(fn))
}

// Inlinks asks the crawl for the links to url, streamed one a line.
func (c *Client) Inlinks(url string, fn func(store.Edge) error) error {
	return stream(c.path, cmdInlinks, Args{URL: url}, edgeLines(fn))
}

func edgeLines(fn func(store.Edge) error) func(json.RawMessage) error {
	return func(line json.RawMessage) error {
		var w wireEdge
		if err := json.Unmarshal(line, &w); err != nil {
			return fmt.Errorf("control edges: decode a link: %w", err)
		}
		return fn(w.edge())
	}
}

// ClosableFile is a File that Open closes when done with it.
type ClosableFile interface {
	File
	Close() error
}

// Open returns the API of the database at dbPath: a Client when a crawl
// answers on its control socket, otherwise an Offline over the file openDB
// opens. closeFn releases what Open opened.
func Open(dbPath string, openDB func() (ClosableFile, error)) (api API, closeFn func() error, err error) {
	c := NewClient(SocketPath(dbPath))
	_, err = c.Status()
	if err == nil {
		return c, func() error { return nil }, nil
	}
	if !errors.Is(err, ErrNoServer) {
		return nil, nil, err
	}
	db, err := openDB()
	if err != nil {
		return nil, nil, fmt.Errorf("%w (and no crawl answered on %s)", err, c.path)
	}
	return NewOffline(db), db.Close, nil
}
