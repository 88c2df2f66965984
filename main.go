// Command breakwater is a web crawler for small and medium sites that
// survives what the web does to crawlers: hosts that go down, throttle or
// refuse, and restarts of the crawler itself. The commands live in
// package cli; this file only wires them to the process.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"breakwater/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal kills the process at once
	}()
	err := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.ExitCode(err, os.Stderr))
}
