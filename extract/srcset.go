package extract

import (
	"errors"
	"strconv"
	"strings"
)

// srcsetURLs returns the URLs of a srcset attribute's image candidates, as
// the HTML standard parses them ("parse a srcset attribute"): candidates
// are separated by commas; each is a URL (which may hold commas, but not
// end with one) and then descriptors ("2x", "300w", "200h"), and a
// candidate whose descriptors a browser would reject is dropped.
func srcsetURLs(srcset string) []string {
	var urls []string
	for pos := 0; ; {
		pos = skip(srcset, pos, func(c byte) bool { return isHTMLSpace(c) || c == ',' })
		if pos >= len(srcset) {
			return urls
		}
		end := skip(srcset, pos, func(c byte) bool { return !isHTMLSpace(c) })
		url := srcset[pos:end]
		pos = end
		var descriptors []string
		if trimmed := strings.TrimRight(url, ","); len(trimmed) < len(url) {
			url = trimmed // a comma ends the candidate: no descriptors
		} else {
			descriptors, pos = srcsetDescriptors(srcset, pos)
		}
		if url != "" && validDescriptors(descriptors) {
			urls = append(urls, url)
		}
	}
}

// skip returns the index of the first byte of s from pos on that is not
// in the class, or len(s).
func skip(s string, pos int, in func(byte) bool) int {
	for pos < len(s) && in(s[pos]) {
		pos++
	}
	return pos
}

// isHTMLSpace reports ASCII whitespace as HTML defines it.
func isHTMLSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

// srcsetDescriptors tokenizes the descriptors that follow a candidate's
// URL, up to the comma that ends the candidate (parentheses may hold
// commas), and returns them and the position after that comma.
func srcsetDescriptors(s string, pos int) ([]string, int) {
	pos = skip(s, pos, isHTMLSpace)
	var descriptors []string
	start, inParens := pos, false
	flush := func(end int) {
		if end > start {
			descriptors = append(descriptors, s[start:end])
		}
	}
	for ; pos < len(s); pos++ {
		c := s[pos]
		switch {
		case inParens:
			inParens = c != ')'
		case c == '(':
			inParens = true
		case c == ',':
			flush(pos)
			return descriptors, pos + 1
		case isHTMLSpace(c):
			flush(pos)
			start = pos + 1
		}
	}
	flush(pos)
	return descriptors, pos
}

// validDescriptors applies the standard's checks to one candidate's
// descriptors: at most one width ("300w", a positive integer), one density
// ("1.5x", non-negative) and one height ("200h", only with a width), never
// a width and a density both, and nothing else.
func validDescriptors(descriptors []string) bool {
	var w, x, h bool
	for _, d := range descriptors {
		value, unit := d[:len(d)-1], d[len(d)-1]
		switch {
		case unit == 'w' && !w && !x && positiveInteger(value):
			w = true
		case unit == 'x' && !w && !x && !h && nonNegativeFloat(value):
			x = true
		case unit == 'h' && !h && !x && positiveInteger(value):
			h = true
		default:
			return false
		}
	}
	return !h || w
}

// positiveInteger reports whether s is a valid non-negative integer (ASCII
// digits) greater than zero.
func positiveInteger(s string) bool {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return false
	}
	return strings.TrimLeft(s, "0") != ""
}

// nonNegativeFloat reports whether s is a valid floating-point number, as
// HTML writes them ("1", "1.5", ".5", "1e2"), that is not below zero.
func nonNegativeFloat(s string) bool {
	digits := func(i int) int { return skip(s, i, func(c byte) bool { return '0' <= c && c <= '9' }) }
	i := 0
	if strings.HasPrefix(s, "-") {
		i++
	}
	end := digits(i)
	mantissa := end > i
	if i = end; i < len(s) && s[i] == '.' {
		if end = digits(i + 1); end == i+1 {
			return false
		}
		mantissa, i = true, end
	}
	if !mantissa {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if end = digits(i); end == i {
			return false
		}
		i = end
	}
	if i != len(s) {
		return false
	}
	f, err := strconv.ParseFloat(s, 64)
	return (err == nil || errors.Is(err, strconv.ErrRange)) && f >= 0
}
