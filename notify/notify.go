// Package notify tells a person's webhook about what needs a human: a host
// that refused the crawler by name, a host given up on, the crawl paused
// for a fault of its own and resumed, a run that ended with a non-zero
// exit code. Events are POSTed as JSON from a goroutine of
// their own, retried with backoff, and never block the crawl: a full queue
// drops the event with a log line, and the crawl's exit code never depends
// on a delivery.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"
)

// Event is one notification. Kind is "case", "host-given-up",
// "local-fault", "local-fault-cleared" or "run-ended"; Fields say the rest
// (host, url, status, exit...).
type Event struct {
	Kind   string         `json:"event"`
	Time   time.Time      `json:"time"`
	Crawl  string         `json:"crawl"` // the database file, naming the crawl
	Fields map[string]any `json:"fields,omitempty"`
}

// Options tune a Notifier; zero values take the defaults.
type Options struct {
	Attempts int           // tries per event; default 4
	Backoff  time.Duration // before the second try, doubled after each; default 1s
	Timeout  time.Duration // per POST; default 10s
	Queue    int           // events waiting; default 256
	Client   *http.Client
	Logger   *slog.Logger
	Now      func() time.Time
}

// Notifier delivers events to one URL. A nil *Notifier drops everything,
// so callers need not check for one.
type Notifier struct {
	url   string
	crawl string
	opts  Options
	queue chan Event
	done  chan struct{}
}

// ParseURL checks a --notify value: an absolute http(s) URL.
func ParseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--notify %q: want an http:// or https:// URL", raw)
	}
	return u.String(), nil
}

// New starts a Notifier POSTing to target; Close must follow.
func New(target, crawl string, o Options) *Notifier {
	if o.Attempts <= 0 {
		o.Attempts = 4
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Queue <= 0 {
		o.Queue = 256
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	n := &Notifier{url: target, crawl: crawl, opts: o, queue: make(chan Event, o.Queue), done: make(chan struct{})}
	go n.run()
	return n
}

// Send queues an event; it never blocks.
func (n *Notifier) Send(kind string, fields map[string]any) {
	if n == nil {
		return
	}
	ev := Event{Kind: kind, Time: n.opts.Now().UTC(), Crawl: n.crawl, Fields: fields}
	select {
	case n.queue <- ev:
	default:
		n.opts.Logger.Warn("notify: queue full, event dropped", "event", kind)
	}
}

// Close delivers what is queued, giving up on whatever is left when ctx
// ends, and stops the Notifier.
func (n *Notifier) Close(ctx context.Context) {
	if n == nil {
		return
	}
	close(n.queue)
	select {
	case <-n.done:
	case <-ctx.Done():
		n.opts.Logger.Warn("notify: stopped before every event was delivered", "url", n.url)
	}
}

func (n *Notifier) run() {
	defer close(n.done)
	for ev := range n.queue {
		n.deliver(ev)
	}
}

// deliver POSTs ev, retrying a failure or a non-2xx answer with backoff.
func (n *Notifier) deliver(ev Event) {
	body, err := json.Marshal(ev)
	if err != nil {
		n.opts.Logger.Error("notify: encode event", "event", ev.Kind, "err", err)
		return
	}
	wait := n.opts.Backoff
	for attempt := 1; ; attempt++ {
		err := n.post(body)
		if err == nil {
			return
		}
		if attempt == n.opts.Attempts {
			n.opts.Logger.Warn("notify: event not delivered", "event", ev.Kind, "url", n.url, "attempts", attempt, "err", err)
			return
		}
		time.Sleep(wait)
		wait *= 2
	}
}

func (n *Notifier) post(body []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), n.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.opts.Client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}
