package crawl

import "time"

// WithHousekeeping returns o with the housekeeping sweep run every d.
func WithHousekeeping(o Options, d time.Duration) Options {
	o.housekeepEvery = d
	return o
}
