package breaker

import "errors"

// Sentinel errors. Callers branch on them with errors.Is; the registry wraps
// them with the host name.
var (
	// ErrNotPaused is returned by Unpause for a host neither paused nor
	// held by a case.
	ErrNotPaused = errors.New("host not paused")
	// ErrCaseOpen is returned by Unpause for a host held by a case but not
	// paused: a refusal must be resolved with ResolveCase, not unpaused.
	ErrCaseOpen = errors.New("host has an open case")
	// ErrNoCase is returned by ResolveCase for a host without a case.
	ErrNoCase = errors.New("host has no open case")
)
