package verify_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"breakwater/redisstore"
	"breakwater/redisstore/redistest"
	"breakwater/verify"
)

// With Options.Placed (a fleet's store, whose archive state is stored
// before its results), each done page is checked where the store placed
// it; pages placed in files not read, and records no result names, are
// counted, never problems.
func TestPlacedArchive(t *testing.T) {
	srv := redistest.Start(t)
	rk := &redisKit{srv: srv, rdb: srv.Client()}
	// f1 is read and has pages at offsets 0 and 10; f2 is another
	// machine's, not read.
	placed := func(url, placement string) (bool, error) {
		switch {
		case strings.HasPrefix(placement, "f2 "):
			return false, nil
		case placement == "f1 0" || placement == "f1 10":
			return true, nil
		}
		return true, errors.New("no record starts there")
	}
	archive := map[string]int{a1.URL: 2, d1.URL: 1, "http://a.com/refetched": 1, "http://a.com/robots.txt": 1}
	tests := []struct {
		name                         string
		placements                   map[string]string // URL -> placement; a done page not listed has none
		want                         string            // a problem; "" for none
		placedHere, elsewhere, extra int64
	}{
		{name: "every page where placed", placements: map[string]string{a1.URL: "f1 0", c1.URL: "f2 0", d1.URL: "f1 10"},
			placedHere: 2, elsewhere: 1, extra: 2},
		{name: "a done page with no placement", placements: map[string]string{a1.URL: "f1 0", c1.URL: "f2 0"},
			want: "page " + d1.URL + " (", placedHere: 1, elsewhere: 1, extra: 3},
		{name: "a placement with no record", placements: map[string]string{a1.URL: "f1 99", c1.URL: "f2 0", d1.URL: "f1 10"},
			want: "not in the archive where the store placed it (f1 99): no record starts there", placedHere: 1, elsewhere: 1, extra: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rk.fresh(t)
			for it := range done {
				if p, ok := tc.placements[it.URL]; ok {
					rk.do(t, "HSET", hostKey(it.Host, "w"), hashKey(it.Hash), p)
				}
			}
			st, err := redisstore.Open(context.Background(), srv.URL(), redisstore.ReadOnly)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			rep, err := st.Verify(t.Context(), verify.Options{Archive: archive, Placed: placed})
			if err != nil {
				t.Fatal(err)
			}
			problems := strings.Join(rep.Problems, "\n")
			switch {
			case tc.want == "" && !rep.OK():
				t.Errorf("problems %q, want none", problems)
			case tc.want != "" && (len(rep.Problems) != 1 || !strings.Contains(problems, tc.want)):
				t.Errorf("problems %q, want one saying %q", problems, tc.want)
			}
			if rep.ArchivePlaced != tc.placedHere || rep.ArchivedElsewhere != tc.elsewhere || rep.ArchiveExtra != tc.extra {
				t.Errorf("placed %d, elsewhere %d, extra %d; want %d, %d, %d", rep.ArchivePlaced, rep.ArchivedElsewhere,
					rep.ArchiveExtra, tc.placedHere, tc.elsewhere, tc.extra)
			}
		})
	}
}
