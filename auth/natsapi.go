package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// apiPrefix is where, in the hub's account, the hub answers the JetStream
// API calls of scoped native clients that JetStream cannot answer for them:
// "_EHAPI.<account>.STREAM.NAMES". Their accounts import
// $JS.API.STREAM.NAMES from there (see principalAccounts); no native
// client may use these subjects.
const apiPrefix = "_EHAPI."

// streamNamesPage is JetStream's page size for stream names.
const streamNamesPage = 1024

// StreamNames answers the stream lookups ($JS.API.STREAM.NAMES, which
// nats.go's StreamNameBySubject and nats.js's streams.find make) of scoped
// native clients, on nc (the hub's own connection to the embedded server),
// until Close. JetStream would list every stream whose subjects match the
// request's filter, or every stream without one: the names of topics the
// client may not read nor publish to. The hub lists the streams of the
// client's topics that match the filter, paged as JetStream pages.
type StreamNames struct {
	n   *NATS
	sub *nats.Subscription
}

// ServeStreamNames starts answering the stream lookups of scoped clients.
func (n *NATS) ServeStreamNames(nc *nats.Conn) (*StreamNames, error) {
	s := &StreamNames{n: n}
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

// Close stops answering (lookups in progress may still be answered, as
// long as the connection is open). Closing twice, or after the connection
// closed, is not an error.
func (s *StreamNames) Close() error {
	if err := s.sub.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
		return err
	}
	return nil
}

// streamNamesRequest and streamNamesResponse are JetStream's.
type streamNamesRequest struct {
	Subject string `json:"subject,omitempty"`
	Offset  int    `json:"offset"`
}

type streamNamesResponse struct {
	Type    string   `json:"type"`
	Total   int      `json:"total"`
	Offset  int      `json:"offset"`
	Limit   int      `json:"limit"`
	Streams []string `json:"streams"`
	Error   *apiErr  `json:"error,omitempty"`
}

type apiErr struct {
	Code        int    `json:"code"`
	Description string `json:"description"`
}

func (s *StreamNames) handle(m *nats.Msg) {
	key := strings.TrimSuffix(strings.TrimPrefix(m.Subject, apiPrefix), ".STREAM.NAMES")
	resp := streamNamesResponse{Type: "io.nats.jetstream.api.v1.stream_names_response", Limit: streamNamesPage, Streams: []string{}}
	var req streamNamesRequest
	if len(m.Data) > 0 {
		if err := json.Unmarshal(m.Data, &req); err != nil {
			resp.Error = &apiErr{Code: 400, Description: "invalid JSON: " + err.Error()}
		}
	}
	if resp.Error == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		names, err := s.names(ctx, key, req.Subject)
		cancel()
		if err != nil {
			s.n.log.Warn("native stream lookup", "err", err)
			resp.Error = &apiErr{Code: 503, Description: "stream lookup failed"}
		} else {
			resp.Total, resp.Offset = len(names), min(max(req.Offset, 0), len(names))
			resp.Streams = names[resp.Offset:min(resp.Offset+streamNamesPage, len(names))]
		}
	}
	out, _ := json.Marshal(resp)
	_ = m.Respond(out)
}

// names returns, sorted, the streams holding topics of the account named
// name whose subjects match filter ("" for any): looked up topic by topic
// in the directory (see Directory), not by a listing of every stream.
func (s *StreamNames) names(ctx context.Context, name, filter string) ([]string, error) {
	d := s.n.dir.Load()
	if d == nil {
		return nil, nil
	}
	var out []string
	for _, t := range s.n.accounts.topicsOf(name) {
		found, err := d.TopicStreams(ctx, t, false)
		if err != nil {
			return nil, err
		}
		for _, st := range found {
			if (filter == "" || collides(st.Subjects, []string{filter})) && !slices.Contains(out, st.Name) {
				out = append(out, st.Name)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// collides reports whether a subject of a overlaps one of b.
func collides(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if server.SubjectsCollide(x, y) {
				return true
			}
		}
	}
	return false
}
