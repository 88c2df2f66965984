package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"breakwater/control"
	"breakwater/storage"
)

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", "status [flags]", stdout)
	dbPath := fs.String("db", "breakwater.db", "database file (a running crawl on it answers through its control socket)")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return withAPI(*dbPath, func(a control.API) error {
		st, err := a.Status()
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, st)
		}
		printStatus(stdout, st)
		return nil
	})
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printStatus(w io.Writer, st *control.Status) {
	state := "not running"
	if st.Running {
		state = fmt.Sprintf("running, %d in flight", st.InFlight)
	}
	fmt.Fprintf(w, "crawl        %s\nurls seen    %d\nqueued       %d\ndeferred     %d\nfetched      %d\nfailed       %d\nhosts        %d (%d with queued URLs)\n",
		state, st.Seen, st.Queued, st.Deferred, st.Fetched, st.Failed, st.Hosts, st.HostsQueued)
	if len(st.FailedByClass) > 0 {
		fmt.Fprintln(w, "failures by class:")
		for _, k := range sortedKeys(st.FailedByClass) {
			fmt.Fprintf(w, "  %-20s %d\n", k, st.FailedByClass[k])
		}
	}
	if len(st.StatusCodes) > 0 {
		fmt.Fprintln(w, "responses by status (0: no response):")
		codes := make([]int, 0, len(st.StatusCodes))
		for c := range st.StatusCodes {
			codes = append(codes, c)
		}
		sort.Ints(codes)
		for _, c := range codes {
			fmt.Fprintf(w, "  %-20d %d\n", c, st.StatusCodes[c])
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// openExisting opens a database that must already exist (the read commands
// never create one by accident).
func openExisting(path string) (*storage.DB, error) {
	if !fileExists(path) {
		return nil, usagef("--db %s: no such file", path)
	}
	return storage.Open(path, nil)
}
