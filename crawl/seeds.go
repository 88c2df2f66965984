package crawl

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"

	"breakwater/fetch"
	"breakwater/frontier"
	"breakwater/store"
)

// ForEachSeed reads one seed a line from r, as a stream: fn gets each
// seed's URL in turn (as NormalizeSeed reads it), and an error from fn
// stops the reading and is returned. Blank lines and lines starting with #
// are skipped, a trailing " # comment" is allowed, and so is a byte order
// mark at the start. A bad line fails the
// whole file with an error naming the file, the line and what is wrong. Seeds read as
// http:// for want of a scheme are logged to log, if not nil: the first
// few one by one, then how many in all.
func ForEachSeed(r io.Reader, name string, log *slog.Logger, fn func(url string) error) error {
	const shown = 3
	assumed := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if n == 1 {
			line = strings.TrimPrefix(line, "\uFEFF") // a byte order mark from Windows tools
		}
		line = strings.TrimSpace(line)
		if i := strings.Index(line, " #"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		url, schemeless, err := NormalizeSeed(line)
		if err != nil {
			return fmt.Errorf("%s line %d: %w", name, n, err)
		}
		if schemeless {
			assumed++
			if log != nil && assumed <= shown {
				log.Info("seed without a scheme read as http://", "seed", line, "file", name, "line", n, "url", url)
			}
		}
		if err := fn(url); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	if log != nil && assumed > shown {
		log.Info("seeds without a scheme read as http://", "file", name, "count", assumed)
	}
	return nil
}

// NormalizeSeed reads one seed as curl and wget do: trimmed, and a seed
// without a scheme ("example.com/docs", "localhost:8080") is read as
// http:// (schemeless reports it). Anything else that is not an http(s)
// URL is refused with an error that says what is wrong with it.
func NormalizeSeed(raw string) (url string, schemeless bool, err error) {
	s := strings.TrimSpace(raw)
	switch {
	case s == "":
		return "", false, fmt.Errorf("empty seed")
	case strings.ContainsAny(s, " \t\r\n"):
		return "", false, fmt.Errorf("seed %q contains a space: a seed is one URL", s)
	}
	if scheme, ok := seedScheme(s); ok {
		if l := strings.ToLower(scheme); l != "http" && l != "https" {
			return "", false, fmt.Errorf("seed %q: the scheme %q is not http or https", s, scheme)
		}
	} else {
		if before, _, ok := strings.Cut(s, "://"); ok && !strings.ContainsAny(before, "/?#") {
			// "1http://x", or a scheme after an invisible character: not
			// a host to read as http://.
			return "", false, fmt.Errorf("seed %q: %q is not a URL scheme", s, before)
		}
		s, schemeless = "http://"+strings.TrimPrefix(s, "//"), true
	}
	if _, err := frontier.NewItem(s, 0, 0); err != nil {
		return "", false, fmt.Errorf("seed %q is not a usable URL: %s", raw, urlProblem(err))
	}
	return s, schemeless, nil
}

// seedScheme returns the scheme s starts with, if it has one: letters,
// digits, '+', '-', '.' before a ':' that does not start a port
// ("localhost:8080" has none).
func seedScheme(s string) (string, bool) {
	i := strings.IndexByte(s, ':')
	if i <= 0 || !isAlpha(s[0]) {
		return "", false
	}
	for _, c := range []byte(s[:i]) {
		if !isAlpha(c) && !('0' <= c && c <= '9') && c != '+' && c != '-' && c != '.' {
			return "", false
		}
	}
	rest := s[i+1:]
	if strings.HasPrefix(rest, "//") {
		return s[:i], true
	}
	// host:port[/path]: a port is all digits up to the path.
	port, _, _ := strings.Cut(rest, "/")
	if port != "" && strings.Trim(port, "0123456789") == "" {
		return "", false
	}
	return s[:i], true
}

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// urlProblem turns the URL parser's error into the part a person needs:
// "The host contains a forbidden domain code point: ' '", not its framing.
func urlProblem(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "Error: "); i >= 0 {
		msg = msg[i+len("Error: "):]
	} else if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	if i := strings.Index(msg, " Url: '"); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSuffix(strings.TrimSpace(msg), ".")
}

// SeedsBlockedError refuses a crawl whose every seed the address guard
// would refuse (loopback, private, link-local... without AllowPrivate): it
// could fetch nothing, and says so before it starts.
type SeedsBlockedError struct {
	Seeds   int      // seeds given
	Example []string // a few of them, with the reason
}

func (e *SeedsBlockedError) Error() string {
	return fmt.Sprintf("every seed (%d) is on an address the crawler refuses by default: %s; add --allow-private to crawl local or intranet sites",
		e.Seeds, strings.Join(e.Example, ", "))
}

// seedsBlocked counts the seeds on addresses the guard refuses.
type seedsBlocked struct {
	seeds, blocked int
	example        []string
}

func (b *seedsBlocked) check(it store.Item, allowPrivate bool) {
	b.seeds++
	if allowPrivate {
		return
	}
	host := it.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if reason, blocked := fetch.BlockedHost(host); blocked {
		b.blocked++
		if len(b.example) < 3 {
			b.example = append(b.example, fmt.Sprintf("%s (%s)", it.URL, reason))
		}
	}
}

// verdict refuses the crawl when every seed is blocked and warns, at the
// start, when some are: they will be recorded as blocked.
func (b *seedsBlocked) verdict(log *slog.Logger) error {
	switch {
	case b.blocked == 0:
		return nil
	case b.blocked == b.seeds:
		return &SeedsBlockedError{Seeds: b.seeds, Example: b.example}
	}
	log.Warn("some seeds are on addresses the crawler refuses by default; they will be recorded as blocked (add --allow-private to crawl them)",
		"blocked", b.blocked, "seeds", b.seeds, "example", strings.Join(b.example, ", "))
	return nil
}
