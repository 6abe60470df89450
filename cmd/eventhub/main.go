// Command eventhub runs the event hub: the event bus on an embedded (or
// external) NATS JetStream server and the servers in front of it.
//
//	eventhub [serve] [flags]   run the hub (the default)
//	eventhub config [flags]    print the effective configuration, secrets redacted
//	eventhub export -topic T   export a topic's events as NDJSON
//	eventhub topics create T   create topics' streams ahead of their first use
//	eventhub healthcheck       succeed when the local hub is ready
//	eventhub bench             load a running hub and report events/s and latency
//	eventhub token -scopes S   mint a development HS256 token
//	eventhub version           print the version
//
// Every flag can also be set by the environment variable named in its help,
// and every setting by the configuration file (-config).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // -h: the flags were printed, as asked
		}
		fmt.Fprintln(os.Stderr, "eventhub:", err)
		os.Exit(1)
	}
}

// run is the whole program; main only supplies the process's context,
// arguments, environment and output.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, getenv, stderr)
	case "config":
		return configCmd(args, getenv, stdout, stderr)
	case "export":
		return export(ctx, args, getenv, stdout, stderr)
	case "topics":
		return topics(ctx, args, getenv, stdout, stderr)
	case "token":
		return token(args, getenv, stdout, stderr)
	case "healthcheck":
		return healthcheck(ctx, args, getenv, stdout, stderr)
	case "bench":
		return benchCmd(ctx, args, getenv, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, version())
		return nil
	case "help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", cmd, usage)
}

const usage = `usage:
  eventhub [serve] [flags]   run the hub (eventhub -h lists the flags)
  eventhub config [flags]    print the effective configuration (file, environment, flags), secrets redacted
  eventhub export -topic T   write a topic's events (-from, -to, -limit) as NDJSON to -out
  eventhub topics create T…  create the topics' streams now, so native NATS clients can publish to them
  eventhub token -scopes S   mint a development HS256 token signed with $JWT_SECRET
  eventhub healthcheck       exit 0 when the hub on this machine is ready (GET /readyz)
  eventhub bench             publish and consume load against a running hub (eventhub bench -h lists the flags)
  eventhub version           print the version
  eventhub help              print this list`
