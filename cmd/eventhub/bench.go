package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/eventhub/eventhub/bench"
)

// benchCmd runs a load against a running hub (see package bench): a
// progress line per interval on stderr, the summary on stdout. Then it
// deletes the topic or group the run created, unless -keep.
func benchCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var c bench.Config
	var asJSON bool
	fs := flag.NewFlagSet("eventhub bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := newFlags(fs, getenv)
	f.str(&c.WSURL, "ws", "EVENTHUB_WS_URL", "ws://127.0.0.1:8090", "the hub's WebSocket gateway")
	f.str(&c.HTTPURL, "http", "EVENTHUB_HTTP_URL", "http://127.0.0.1:8081", "the hub's HTTP port (POST /publish)")
	f.urls(&c.NATSURL, "nats", "EVENTHUB_NATS_URL", "nats://127.0.0.1:4222", "the hub's NATS client port")
	f.str(&c.OpsURL, "ops", "EVENTHUB_OPS_URL", "http://127.0.0.1:8082", "the hub's ops port, whose admin API deletes what the run created")
	f.secret(&c.Token, "token", "EVENTHUB_TOKEN", "", "token of every connection (WebSocket AUTH, HTTP bearer, NATS token)")
	fs.StringVar(&c.Transport, "transport", bench.TransportWS, "publishers' way in: ws (the Go client), http or nats (native JetStream publish)")
	fs.StringVar(&c.Topic, "topic", "bench.load", "topic to publish to and consume")
	fs.IntVar(&c.Publishers, "publishers", 1, "concurrent publishers (-1: none, consumers only)")
	fs.IntVar(&c.Connections, "connections", 0, "connections the publishers share (default one each)")
	fs.IntVar(&c.Consumers, "consumers", 0, "WebSocket consumers, one connection each")
	fs.StringVar(&c.Group, "group", "bench", "the consumers' group (\"\" for live subscriptions: each gets every event)")
	fs.IntVar(&c.Size, "size", 128, "event payload size in bytes")
	fs.Float64Var(&c.Rate, "rate", 0, "total publish rate in events/s (0: as fast as the hub answers)")
	fs.DurationVar(&c.Duration, "duration", bench.Config{}.Duration, "how long to run (default 10s)")
	fs.DurationVar(&c.Progress, "progress", 0, "interval of the progress line (default 1s, negative: none)")
	fs.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	fs.BoolVar(&c.Keep, "keep", false, "keep the topic and group the run created (by default they are deleted when it ends)")
	if err := f.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected arguments %v", fs.Args())
	}
	sum, err := bench.Run(ctx, c, stderr)
	if err != nil && !errors.Is(err, bench.ErrCleanup) {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return errors.Join(enc.Encode(sum), err)
	}
	return errors.Join(sum.WriteText(stdout), err)
}
