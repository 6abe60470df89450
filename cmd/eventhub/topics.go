package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
	"github.com/eventhub/eventhub/jetstream"
)

// errNoAuthNeeded: credentials were given to a server that takes none.
var errNoAuthNeeded = errors.New("credentials given to a server without auth")

// looksLikeTopic reports whether a token is a dotted topic name rather than
// a credential: a static token has no dots, a JWT (which has) starts with
// "eyJ", its JSON header in base64url.
func looksLikeTopic(token string) bool {
	return strings.Contains(token, ".") && !strings.HasPrefix(token, "eyJ") && facade.ValidateTopic(token) == nil
}

// topics declares topics ahead of their first use: "eventhub topics create
// T…" creates each topic's stream (its own, or the family stream the
// configuration file names), so that native NATS publishers can publish to
// it with acknowledgements before the hub has touched it.
func topics(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "create" {
		return errors.New("topics: usage: eventhub topics create [flags] TOPIC…")
	}
	fs := flag.NewFlagSet("eventhub topics create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := newFlags(fs, getenv)
	var natsURL, token, user, password, creds, configFile string
	f.urls(&natsURL, "nats-url", "NATS_URL", "nats://127.0.0.1:4222", "NATS server of the hub (the embedded one listens on 127.0.0.1:4222)")
	f.secret(&token, "nats-token", "NATS_TOKEN", "", "token for the NATS server (with hub auth on: the static WS_TOKEN or a token with the admin scope)")
	f.str(&user, "nats-user", "NATS_USER", "", "NATS user")
	f.secret(&password, "nats-password", "NATS_PASSWORD", "", "NATS password")
	f.str(&creds, "nats-creds", "NATS_CREDS", "", "NATS credentials file")
	f.str(&configFile, "config", "EVENTHUB_CONFIG", "", "the hub's YAML configuration, for the topics' stream settings and families")
	if err := f.parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("topics create: name at least one topic")
	}
	if looksLikeTopic(token) {
		return errors.New("topics create: -nats-token is a topic name, not a token: was the variable after -nats-token empty?")
	}
	oc := jetstream.OpenConfig{URL: natsURL}
	if configFile != "" {
		fc, err := hub.LoadFile(configFile)
		if err != nil {
			return fmt.Errorf("topics create: %w", err)
		}
		oc.Bus = fc.Bus
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
		return fmt.Errorf("topics create: %w", err)
	}
	defer bus.Close()
	if given := token != "" || user != "" || creds != ""; given && !bus.Conn().AuthRequired() {
		// The value meant for the flag is likely missing (an unset
		// variable), so that the flag took an argument meant for another.
		return fmt.Errorf("topics create: %w: the NATS server at %s needs no credentials, yet some were given (-nats-token, -nats-user or -nats-creds): was the variable after one of them empty?", errNoAuthNeeded, natsURL)
	}
	for _, t := range fs.Args() {
		stream, err := bus.CreateTopic(ctx, t)
		if err != nil {
			return fmt.Errorf("topics create: %s: %w", t, err)
		}
		fmt.Fprintf(stdout, "%s\t%s\n", t, stream)
	}
	return nil
}
