package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// apiPrefix is where, in the hub's account, the hub answers the JetStream
// API calls of scoped native clients that JetStream cannot answer for them:
// "_EHAPI.<account>.STREAM.NAMES". Their accounts import
// $JS.API.STREAM.NAMES from there (see principalAccounts).
const apiPrefix = "_EHAPI."

// StreamNames answers the stream lookups ($JS.API.STREAM.NAMES, which
// nats.go's StreamNameBySubject and nats.js's streams.find make) of scoped
// native clients, on nc (the hub's own connection to the embedded server),
// until Close. JetStream would list every stream whose subjects match the
// request's filter, or every stream without one: the names of topics the
// client may not read nor publish to. The hub asks JetStream and keeps the
// streams of the client's topics.
type StreamNames struct {
	n   *NATS
	nc  *nats.Conn
	sub *nats.Subscription
}

// ServeStreamNames starts answering the stream lookups of scoped clients.
func (n *NATS) ServeStreamNames(nc *nats.Conn) (*StreamNames, error) {
	s := &StreamNames{n: n, nc: nc}
	sub, err := nc.Subscribe(apiPrefix+"*.STREAM.NAMES", s.handle)
	if err != nil {
		return nil, fmt.Errorf("auth: stream lookups: %w", err)
	}
	s.sub = sub
	if err := nc.Flush(); err != nil {
		return nil, fmt.Errorf("auth: stream lookups: %w", err)
	}
	return s, nil
}

// Close stops answering; lookups in progress finish.
func (s *StreamNames) Close() error { return s.sub.Drain() }

func (s *StreamNames) handle(m *nats.Msg) {
	key := strings.TrimSuffix(strings.TrimPrefix(m.Subject, apiPrefix), ".STREAM.NAMES")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := s.answer(ctx, key, m.Data)
	if err != nil {
		s.n.log.Warn("native stream lookup", "err", err)
		out = []byte(`{"type":"io.nats.jetstream.api.v1.stream_names_response","error":{"code":503,"description":"stream lookup failed"}}`)
	}
	_ = m.Respond(out)
}

// answer asks JetStream the request and keeps the streams of the topics of
// account key.
func (s *StreamNames) answer(ctx context.Context, key string, req []byte) ([]byte, error) {
	topics := s.n.accounts.topicsOf(key)
	resp, err := s.nc.RequestWithContext(ctx, jsAPI+"STREAM.NAMES", req)
	if err != nil {
		return nil, err
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(resp.Data, &body); err != nil {
		return nil, err
	}
	if _, failed := body["error"]; failed {
		return resp.Data, nil
	}
	var names []string
	if raw, ok := body["streams"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &names); err != nil {
			return nil, err
		}
	}
	var offset int
	if raw, ok := body["offset"]; ok {
		_ = json.Unmarshal(raw, &offset)
	}
	var dir Directory
	if d := s.n.dir.Load(); d != nil {
		dir = d.Directory
	}
	allowed := map[string]bool{}
	for _, t := range topics {
		if dir == nil {
			break
		}
		found, err := dir.TopicStreams(ctx, t, false)
		if err != nil {
			return nil, err
		}
		for _, st := range found {
			allowed[st.Name] = true
		}
	}
	names = slices.DeleteFunc(names, func(n string) bool { return !allowed[n] })
	body["streams"], _ = json.Marshal(names)
	body["total"], _ = json.Marshal(offset + len(names))
	return json.Marshal(body)
}
