package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"breakwater/storage"
)

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("export", "export [flags] > results.jsonl", stdout)
	dbPath := fs.String("db", "breakwater.db", "database file")
	format := fs.String("format", "jsonl", "output format: jsonl (one JSON object a line)")
	failedOnly := fs.Bool("failed", false, "export only failed URLs")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *format != "jsonl" {
		return usagef("--format %q: only jsonl is supported", *format)
	}
	db, err := openExisting(*dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	w := bufio.NewWriterSize(stdout, 64<<10)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	err = db.ForEachResult(func(r *storage.Result) error {
		if *failedOnly && !r.Failed() {
			return nil
		}
		return enc.Encode(r)
	})
	if err != nil {
		return fmt.Errorf("export %s: %w", *dbPath, err)
	}
	return w.Flush()
}
