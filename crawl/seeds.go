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
	err := ForEachSeed(r, name, func(s string) error {
		seeds = append(seeds, s)
		return nil
	})
	return seeds, err
}

// ForEachSeed is ReadSeeds as a stream: fn gets each seed in turn, and an
// error from fn stops the reading and is returned.
func ForEachSeed(r io.Reader, name string, fn func(string) error) error {
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
			return fmt.Errorf("%s line %d: %w", name, n, err)
		}
		if err := fn(line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	return nil
}
