package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"breakwater/storage"
)

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", "status [flags]", stdout)
	dbPath := fs.String("db", "breakwater.db", "database file")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	db, err := openExisting(*dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := readStatus(db)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	printStatus(stdout, st)
	return nil
}

// status is what `breakwater status` shows.
type status struct {
	storage.Counts
	Hosts        int            `json:"hosts"`
	HostsQueued  int            `json:"hosts_with_queued"`
	FailedByKind map[string]int `json:"failed_by_class"`
	StatusCodes  map[int]int    `json:"status_codes"`
}

func readStatus(db *storage.DB) (*status, error) {
	c, err := db.Counts()
	if err != nil {
		return nil, err
	}
	st := &status{Counts: c, FailedByKind: map[string]int{}, StatusCodes: map[int]int{}}
	err = db.ForEachHost(func(_ string, hc storage.HostCounts) error {
		st.Hosts++
		if hc.Queued > 0 {
			st.HostsQueued++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = db.ForEachResult(func(r *storage.Result) error {
		if r.Failed() {
			st.FailedByKind[r.ErrorClass]++
		}
		st.StatusCodes[r.Status]++
		return nil
	})
	return st, err
}

func printStatus(w io.Writer, st *status) {
	fmt.Fprintf(w, "urls seen    %d\nqueued       %d\ndeferred     %d\nfetched      %d\nfailed       %d\nhosts        %d (%d with queued URLs)\n",
		st.Seen, st.Queued, st.Deferred, st.Fetched, st.Failed, st.Hosts, st.HostsQueued)
	if len(st.FailedByKind) > 0 {
		fmt.Fprintln(w, "failures by class:")
		for _, k := range sortedKeys(st.FailedByKind) {
			fmt.Fprintf(w, "  %-20s %d\n", k, st.FailedByKind[k])
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
