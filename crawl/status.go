package crawl

import (
	"breakwater/storage"
)

// Status is what `breakwater status` shows.
type Status struct {
	storage.Counts
	Running       bool           `json:"running"`
	InFlight      int            `json:"in_flight"`
	Hosts         int            `json:"hosts"`
	HostsQueued   int            `json:"hosts_with_queued"`
	FailedByClass map[string]int `json:"failed_by_class"`
	StatusCodes   map[int]int    `json:"status_codes"`
}

// ReadStatus computes the status of the crawl stored in db.
func ReadStatus(db *storage.DB) (*Status, error) {
	c, err := db.Counts()
	if err != nil {
		return nil, err
	}
	st := &Status{Counts: c, FailedByClass: map[string]int{}, StatusCodes: map[int]int{}}
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
	t, err := db.Tallies()
	if err != nil {
		return nil, err
	}
	for class, n := range t.Failed {
		st.FailedByClass[class] = int(n)
	}
	for code, n := range t.Status {
		st.StatusCodes[code] = int(n)
	}
	return st, nil
}
