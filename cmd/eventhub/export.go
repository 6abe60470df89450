package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/ops"
)

// export writes a topic's events in a range as NDJSON, like GET /replay, to a
// file (written whole or not at all) or to stdout.
func export(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eventhub export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := newFlags(fs, getenv)
	var natsURL, token, user, password, creds, dataDir, topic, from, to, out, key, corr, tag string
	var limit int
	f.urls(&natsURL, "nats-url", "NATS_URL", "nats://127.0.0.1:4222", "NATS server of the hub (the embedded one listens on 127.0.0.1:4222)")
	f.secret(&token, "nats-token", "NATS_TOKEN", "", "token for the NATS server (with hub auth on: the static WS_TOKEN)")
	f.str(&user, "nats-user", "NATS_USER", "", "NATS user")
	f.secret(&password, "nats-password", "NATS_PASSWORD", "", "NATS password")
	f.str(&creds, "nats-creds", "NATS_CREDS", "", "NATS credentials file")
	fs.StringVar(&dataDir, "data-dir", "", "read a stopped hub's data directory directly instead of connecting")
	fs.StringVar(&topic, "topic", "", "topic to export (required)")
	fs.StringVar(&from, "from", "", "first position, inclusive: earliest, latest, seq:N, ts:RFC3339 or ts:<ms>, id:<uuid> (default: earliest)")
	fs.StringVar(&to, "to", "", "last position: earliest, latest, or inclusive for seq and id, exclusive for ts (default: latest, the last event now)")
	fs.IntVar(&limit, "limit", 0, "at most this many events (0: no limit)")
	fs.StringVar(&key, "key", "", "only the events with this key (read through the key's subject: no scan)")
	fs.StringVar(&corr, "correlation-id", "", "only the events whose header correlationId (the name in any case) is this (scans the range)")
	fs.StringVar(&tag, "tag", "", "only the events with this tag (scans the range)")
	fs.StringVar(&out, "out", "-", "output file, or - for stdout")
	if err := f.parse(args); err != nil {
		return err
	}
	v := url.Values{"topic": {topic}}
	if from != "" {
		v.Set("from", from)
	}
	if to != "" {
		v.Set("to", to)
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	for name, val := range map[string]string{"key": key, "correlationId": corr, "tag": tag} {
		if val != "" {
			v.Set(name, val)
		}
	}
	q, err := ops.ParseQuery(v)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	oc := jetstream.OpenConfig{URL: natsURL}
	if dataDir != "" {
		oc = jetstream.OpenConfig{Server: jetstream.ServerConfig{DataDir: dataDir, Port: -1}}
	}
	for _, o := range []struct {
		set bool
		opt nats.Option
	}{{token != "", nats.Token(token)}, {user != "", nats.UserInfo(user, password)}, {creds != "", nats.UserCredentials(creds)}} {
		if o.set {
			oc.NATSOptions = append(oc.NATSOptions, o.opt)
		}
	}
	bus, err := jetstream.Open(ctx, oc)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer bus.Close()
	var st ops.ExportStats
	if out == "-" {
		w := bufio.NewWriterSize(stdout, 256<<10)
		st, err = ops.Export(ctx, bus, w, q)
		if ferr := w.Flush(); err == nil {
			err = ferr
		}
	} else {
		st, err = ops.ExportFile(ctx, bus, out, q)
	}
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if q.CorrelationID != "" || q.Tag != "" {
		fmt.Fprintf(stderr, "exported %d of %d events read (%d bytes), seq %d..%d\n", st.Events, st.Scanned, st.Bytes, st.FromSeq, st.LastSeq)
		return nil
	}
	fmt.Fprintf(stderr, "exported %d events (%d bytes), seq %d..%d\n", st.Events, st.Bytes, st.FromSeq, st.LastSeq)
	return nil
}
