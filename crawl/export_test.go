package crawl

import (
	"time"

	"breakwater/sitemap"
)

// WithHousekeeping returns o with the housekeeping sweep run every d.
func WithHousekeeping(o Options, d time.Duration) Options {
	o.housekeepEvery = d
	return o
}

// WithSitemapLimits returns o with each sitemap file bounded by lim.
func WithSitemapLimits(o Options, lim sitemap.Limits) Options {
	o.sitemapLimits = lim
	return o
}
