package fetch

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/publicsuffix"
)

// maxCookieLine caps one line of a cookies.txt; a browser caps a cookie
// at 4 KiB, so this only stops a file that is not one.
const maxCookieLine = 1 << 20

// NewJar returns an empty in-memory cookie jar that scopes cookies with
// the public suffix list, so a server cannot set one for all of .co.uk.
func NewJar() *cookiejar.Jar {
	j, _ := cookiejar.New(&cookiejar.Options{PublicSuffixList: publicsuffix.List}) // never fails
	return j
}

// LoadCookiesFile is LoadCookies of the file at path, at the current time.
func LoadCookiesFile(path string) (*cookiejar.Jar, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cookies: %w", err)
	}
	defer f.Close()
	return LoadCookies(f, path, time.Now())
}

// LoadCookies reads a Netscape cookies.txt, as curl and wget write it,
// into a new jar (NewJar). Each line holds 7 TAB-separated fields: domain
// (a leading dot is dropped), include subdomains (TRUE or FALSE), path,
// secure (TRUE or FALSE), expiry in Unix seconds (0 for a session cookie),
// name and value. A "#HttpOnly_" prefix on the domain marks an HttpOnly
// cookie; other lines starting with "#", and blank lines, are skipped.
// Cookies expired at now are left out. A malformed line fails the whole
// file with an error "name line N: what is wrong".
func LoadCookies(r io.Reader, name string, now time.Time) (*cookiejar.Jar, error) {
	jar := NewJar()
	if err := loadCookies(r, name, now, jar); err != nil {
		return nil, err
	}
	return jar, nil
}

// LoadUserCookiesFile reads the cookies.txt at path, at the current time,
// as LoadCookies does, into two jars holding the same cookies: jar for
// Options.Jar, which servers' cookies then update, and given for
// Options.UserCookies, which stays as the user gave it.
func LoadUserCookiesFile(path string) (jar, given *cookiejar.Jar, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("cookies: %w", err)
	}
	defer f.Close()
	jar, given = NewJar(), NewJar()
	if err := loadCookies(f, path, time.Now(), jar, given); err != nil {
		return nil, nil, err
	}
	return jar, given, nil
}

// loadCookies reads a cookies.txt (see LoadCookies) into every jar given.
func loadCookies(r io.Reader, name string, now time.Time, jars ...*cookiejar.Jar) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, maxCookieLine)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if n == 1 {
			line = strings.TrimPrefix(line, "\uFEFF") // a byte order mark from Windows tools
		}
		c, u, err := parseCookieLine(line)
		if err != nil {
			return fmt.Errorf("%s line %d: %w", name, n, err)
		}
		if c == nil || !c.Expires.IsZero() && !c.Expires.After(now) {
			continue
		}
		for _, jar := range jars {
			jar.SetCookies(u, []*http.Cookie{c})
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// parseCookieLine parses one cookies.txt line into a cookie and the URL
// to set it from, or nil for a comment or blank line.
func parseCookieLine(line string) (*http.Cookie, *url.URL, error) {
	httpOnly := false
	if rest, ok := strings.CutPrefix(line, "#HttpOnly_"); ok {
		line, httpOnly = rest, true
	} else if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
		return nil, nil, nil
	}
	f := strings.Split(line, "\t")
	if len(f) != 7 {
		return nil, nil, fmt.Errorf("%d TAB-separated fields, want 7 (domain, include subdomains, path, secure, expiry, name, value)", len(f))
	}
	domain, path, name, value := strings.TrimPrefix(f[0], "."), f[2], f[5], f[6]
	subdomains, err := parseBool("include subdomains", f[1])
	if err != nil {
		return nil, nil, err
	}
	secure, err := parseBool("secure", f[3])
	if err != nil {
		return nil, nil, err
	}
	expiry, err := strconv.ParseInt(f[4], 10, 64)
	if err != nil || expiry < 0 {
		return nil, nil, fmt.Errorf("expiry %q is not Unix seconds (0 for a session cookie)", f[4])
	}
	switch {
	case domain == "" || strings.ContainsAny(domain, " /?#@"):
		return nil, nil, fmt.Errorf("domain %q is not a host name", f[0])
	case !strings.HasPrefix(path, "/"):
		return nil, nil, fmt.Errorf("path %q does not start with /", path)
	case name == "":
		return nil, nil, fmt.Errorf("the cookie name is empty")
	}
	c := &http.Cookie{Name: name, Value: value, Path: path, Secure: secure, HttpOnly: httpOnly}
	if subdomains {
		c.Domain = domain
	}
	if expiry > 0 {
		c.Expires = time.Unix(expiry, 0)
	}
	// Set from the cookie's own domain, path and scheme, the jar accepts it
	// as the site would have set it.
	u := &url.URL{Scheme: "http", Host: domain, Path: path}
	if strings.Contains(domain, ":") && !strings.HasPrefix(domain, "[") {
		u.Host = "[" + domain + "]" // IPv6
	}
	if secure {
		u.Scheme = "https"
	}
	return c, u, nil
}

func parseBool(field, s string) (bool, error) {
	switch {
	case strings.EqualFold(s, "TRUE"):
		return true, nil
	case strings.EqualFold(s, "FALSE"):
		return false, nil
	}
	return false, fmt.Errorf("%s is %q, want TRUE or FALSE", field, s)
}
