package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"breakwater/control"
)

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", "status [flags]", stdout)
	dbPath := targetFlags(fs, "database file (a running crawl on it answers through its control socket)")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return dbPath.withAPI(func(a control.API) error {
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
	if lf := st.LocalFault; lf != nil {
		fmt.Fprintf(w, "LOCAL FAULT  fetching paused since %s: %d of %d active hosts failing at once (%s); probing %s, %d rounds, next at %s\n",
			lf.TrippedAt.Format(time.TimeOnly), lf.FailingHosts, lf.ActiveHosts, control.DescribeKinds(lf.ErrorKinds),
			strings.Join(lf.Probing, " "), lf.ProbeRounds, lf.NextProbe.Format(time.TimeOnly))
	}
	printSettings(w, st.Settings)
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

// printSettings shows the crawl's stored settings, one a line, by the
// flag that sets them; the seed hosts as a count.
func printSettings(w io.Writer, settings map[string]json.RawMessage) {
	if len(settings) == 0 {
		return
	}
	fmt.Fprintln(w, "settings (stored in the file; a flag given to crawl changes them):")
	for _, k := range sortedKeys(settings) {
		v := settings[k]
		if k == "link_scope" {
			continue // the engine's own bookkeeping, no flag's
		}
		if k == "seed_hosts" {
			var hosts []string
			json.Unmarshal(v, &hosts)
			fmt.Fprintf(w, "  %-20s %d\n", "seed hosts", len(hosts))
			continue
		}
		var list []string
		if json.Unmarshal(v, &list) == nil {
			if len(list) == 0 {
				fmt.Fprintf(w, "  --%-18s -\n", k)
			}
			for _, item := range list {
				fmt.Fprintf(w, "  --%-18s %s\n", k, item)
			}
			continue
		}
		var text string
		if json.Unmarshal(v, &text) == nil {
			if text == "" {
				text = "-"
			}
			fmt.Fprintf(w, "  --%-18s %s\n", k, text)
			continue
		}
		fmt.Fprintf(w, "  --%-18s %s\n", k, v)
	}
}
