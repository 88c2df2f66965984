package control

import (
	"breakwater/store"
	"fmt"
)

// The command table: every command the socket answers, one register call
// each, naming it on the wire and saying how the server calls the API with
// the request's Args. Client forwards each API method with the command its
// line returns.
var (
	cmdStatus = register("status", func(api API, _ Args) (*Status, error) { return api.Status() })
	cmdHosts  = register("hosts", func(api API, a Args) ([]HostRow, error) { return api.Hosts(a.State) })
	cmdTrans  = register("transitions", func(api API, a Args) ([]store.Transition, error) {
		return api.Transitions(a.Host, a.Since)
	})
	cmdCases   = register("cases", func(api API, _ Args) ([]store.Case, error) { return api.Cases() })
	cmdPause   = register("pause", func(api API, a Args) (done, error) { return done{}, api.Pause(a.Host, a.Reason) })
	cmdUnpause = register("unpause", func(api API, a Args) (done, error) { return done{}, api.Unpause(a.Host) })
	cmdResolve = register("resolve", func(api API, a Args) (done, error) { return done{}, api.ResolveCase(a.Host) })
	// results streams: each result is one line of the answer (see stream).
	cmdResults = registerStream("results", func(api API, a Args, emit func(any) error) error {
		return api.Results(a.Failed, func(r *store.Result) error { return emit(r) })
	})
	cmdEdges = registerStream("edges", func(api API, _ Args, emit func(any) error) error {
		return api.Edges(func(e store.Edge) error { return emit(toWire(e)) })
	})
	cmdInlinks = registerStream("inlinks", func(api API, a Args, emit func(any) error) error {
		return api.Inlinks(a.URL, func(e store.Edge) error { return emit(toWire(e)) })
	})
)

// command names an entry of the table for Client. R is what the entry
// answers, so that Client decodes the answer into the type the server
// encoded it from.
type command[R any] struct {
	name string
}

// done is the answer of a command that only acts.
type done struct{}

// handler is a command as the server calls it, its answer's type erased.
type handler func(API, Args) (any, error)

// commands maps each registered name to its handler. It is filled as the
// package initializes and only read afterwards.
var commands = map[string]handler{}

// register adds a command to the table; a name registered twice panics as
// the package initializes.
func register[R any](name string, call func(API, Args) (R, error)) command[R] {
	if _, dup := commands[name]; dup {
		panic(fmt.Sprintf("control: command %q registered twice", name))
	}
	commands[name] = func(api API, a Args) (any, error) { return call(api, a) }
	return command[R]{name: name}
}

// streamHandler is a command whose answer is a stream of values.
type streamHandler func(api API, a Args, emit func(any) error) error

// streams maps each streaming command's name to its handler.
var streams = map[string]streamHandler{}

// registerStream adds a streaming command to the table.
func registerStream(name string, call streamHandler) command[struct{}] {
	if _, dup := commands[name]; dup {
		panic(fmt.Sprintf("control: command %q registered twice", name))
	}
	if _, dup := streams[name]; dup {
		panic(fmt.Sprintf("control: command %q registered twice", name))
	}
	streams[name] = call
	return command[struct{}]{name: name}
}
