package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"breakwater/warc"
)

func runIndex(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("index", "index DIR\n\nWrites DIR/"+warc.IndexName+
		", the CDXJ index of the finished WARC files in DIR (replay tools such as pywb and ReplayWeb.page read it).", stdout)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("index takes one directory of WARC files, got %d arguments", fs.NArg())
	}
	dir := fs.Arg(0)
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		if err == nil {
			return usagef("index %s: not a directory", dir)
		}
		return usagef("index %s: %v", dir, err)
	}
	st, err := warc.WriteIndex(dir)
	if errors.Is(err, warc.ErrNoWARCFiles) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d records from %d WARC files (%d read to index them)", filepath.Join(dir, warc.IndexName),
		st.Records, st.Files, st.Read)
	if st.Unfinished > 0 {
		fmt.Fprintf(stdout, "; %d unfinished files left out", st.Unfinished)
	}
	fmt.Fprintln(stdout)
	return nil
}
