package breaker

// Class is the classified outcome of one request to a host. The breaker is
// fed classes, never raw HTTP statuses, so that a crawl full of 404s cannot
// open a healthy host's circuit.
type Class string

// The outcome classes shared by the classifier, the retry layer and the breaker.
const (
	// OK is a 2xx or 3xx response: the host answered.
	OK Class = "ok"
	// Transient is a connection failure, a timeout or a 5xx: counts as a failure.
	Transient Class = "transient"
	// Permanent is a 4xx other than 429 that does not name the crawler: neutral.
	Permanent Class = "permanent"
	// Throttled is a 429: neutral here, handled by pace control instead.
	Throttled Class = "throttled"
	// Refused is a 401/403 that names the crawler's product token: opens at once and holds.
	Refused Class = "refused"
)
