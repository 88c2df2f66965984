package crawl

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"breakwater/frontier"
)

// ReadSeeds reads one URL a line from r; blank lines and lines starting with
// # are skipped, and a trailing " # comment" is allowed. A bad line fails the
// whole file with an error naming the file, the line and what is wrong.
func ReadSeeds(r io.Reader, name string) ([]string, error) {
	var seeds []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, " #"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if _, err := frontier.NewItem(line, 0, 0); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", name, n, err)
		}
		seeds = append(seeds, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return seeds, nil
}
