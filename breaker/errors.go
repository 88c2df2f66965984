package breaker

import "errors"

// Sentinel errors. Callers branch on them with errors.Is; the registry wraps
// them with the host name.
var (
	// ErrOpen is returned by Decision.Err when a host's circuit refused a request.
	ErrOpen = errors.New("circuit open")
	// ErrNotPaused is returned by Unpause for a host that is not paused.
	ErrNotPaused = errors.New("host not paused")
	// ErrCaseOpen is returned by Unpause for a host held by a case: a
	// refusal must be resolved with ResolveCase, not unpaused.
	ErrCaseOpen = errors.New("host has an open case")
	// ErrNoCase is returned by ResolveCase for a host without a case.
	ErrNoCase = errors.New("host has no open case")
)
