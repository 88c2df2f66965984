// Package control owns the inspection and control commands (status, hosts,
// transitions, cases, pause, unpause, resolve): the API they are asked
// through, the table of commands, and the local control socket through
// which a running crawl answers them.
//
// API has three implementations. Client forwards each call over the Unix
// socket next to the database file to the crawl holding the file's lock;
// Offline answers from a file no crawl holds; the running crawl answers
// for itself (crawl.Engine.Control) from its live breakers, pace and
// budget. What they share lives here once: host rows (HostRows), host-name
// checks (NormalizeHost), the status and log readers (ReadStatus,
// ReadTransitions, ReadCases) and the manual breaker changes (PauseChange,
// UnpauseChange, ResolveChange: a registry step and what to write with
// it). Open picks Client or Offline for a file.
//
// Protocol: one JSON request {"cmd": name, "args": Args} and one JSON
// response {"data": ..., "error": "..."} per connection; a streaming
// command (results, for export) answers instead with one {"data": ...}
// line per value and a last {"end": true, "error": "..."} line, and a
// client that sees no end line reports the answer cut short. Serve answers
// requests one at a time by the command table (commands.go). Only the
// process holding the database lock serves the socket, so a stale socket
// file left by a killed crawl is safe to replace.
//
// Adding a command: a method on API; one register call in commands.go (its
// name, and how it calls the API with the request's Args, adding a field to
// Args if it needs one); the method on Client (one forward call), on
// Offline and on the crawl's implementation (crawl/control.go); and the CLI
// subcommand in package main. TestEveryCommandRoundTrips fails until the
// command has its case there.
//
// Concurrency: Client and Offline are safe for concurrent use as far as
// the database is (storage.DB is); the server answers one request at a
// time.
package control
