package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/wire"
)

// HTTP headers of POST /publish/{topic} that set event options. No other
// request header reaches the event.
const (
	HeaderKey          = "Eventhub-Key"
	HeaderID           = "Eventhub-Id"
	HeaderTags         = "Eventhub-Tags"      // comma-separated
	HeaderCausedBy     = "Eventhub-Caused-By" // comma-separated event ids
	HeaderSID          = "Eventhub-Sid"
	HeaderTS           = "Eventhub-Ts"        // epoch milliseconds
	HeaderPartition    = "Eventhub-Partition" // integer
	HeaderHeaderPrefix = "Eventhub-Header-"   // Eventhub-Header-<Name>: value → headers[lower(name)]
	// HeaderExpectedLastSeq makes the publish a compare-and-set of its key
	// (facade.PublishOptions.ExpectedLastSeq): 409 wrong_last_seq when the
	// key's newest event is no longer at this position (0: the key has none).
	HeaderExpectedLastSeq = "Eventhub-Expected-Last-Seq"
	// HeaderTTLSeconds removes the event from the store this many seconds
	// after it was stored (facade.PublishOptions.TTLSeconds).
	HeaderTTLSeconds = "Eventhub-Ttl-Seconds"
)

// publishResponse is the 200 body of POST /publish/{topic}.
type publishResponse struct {
	ID  string `json:"id"`
	Seq uint64 `json:"seq,omitempty"`
	TS  int64  `json:"ts"`
}

type httpError struct {
	Error struct {
		Code string `json:"code"`
		Msg  string `json:"msg"`
	} `json:"error"`
}

// servePublish is POST /publish/{topic}: the body is the payload, the
// Eventhub-* headers the options.
func (g *Gateway) servePublish(w http.ResponseWriter, r *http.Request) {
	p, topic, ok := g.httpTopic(w, r, "http", ActionPublish)
	if !ok {
		return
	}
	opts, err := publishOptions(r.Header)
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.cfg.MaxPayloadBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeHTTPError(w, wire.Errorf(wire.CodeTooLarge, "body larger than %d bytes", g.cfg.MaxPayloadBytes))
			return
		}
		writeHTTPError(w, wire.Errorf(wire.CodeBadRequest, "read body: %v", err))
		return
	}
	if err := g.limitPublish(p, topic, len(body)); err != nil {
		setRetryAfter(w, err)
		writeHTTPError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(g.bind(r.Context(), p), g.cfg.RequestTimeout)
	defer cancel()
	if tp := r.Header.Get("Traceparent"); tp != "" {
		ctx = facade.ContextWithTrace(ctx, facade.TraceContext{Traceparent: tp, Tracestate: r.Header.Get("Tracestate")})
	}
	rec, err := g.bus.Publish(ctx, topic, body, opts)
	if err != nil {
		code, _ := wire.FromError(err, wire.CodePublishFailed)
		if code == wire.CodePublishFailed || code == wire.CodeInternal {
			g.log.Warn("http publish failed", "topic", topic, "err", err)
		}
		writeHTTPErrorCode(w, err, wire.CodePublishFailed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(publishResponse{ID: rec.ID, Seq: rec.Seq, TS: rec.TS})
}

// httpTopic checks the request's Origin and bearer token, the {topic} of
// its path, and the principal's right to action on it, answering the
// refusal itself (false) when one does not pass.
func (g *Gateway) httpTopic(w http.ResponseWriter, r *http.Request, transport, action string) (Principal, string, bool) {
	p, ok := g.httpPrincipal(w, r, transport)
	if !ok {
		return nil, "", false
	}
	topic := r.PathValue("topic")
	if err := facade.ValidateTopic(topic); err != nil {
		writeHTTPError(w, err)
		return nil, "", false
	}
	if !p.Allow(action, topic, "") {
		g.authFailed(transport, wire.CodeForbidden)
		writeHTTPError(w, wire.Errorf(wire.CodeForbidden, "no %s permission on %s", action, topic))
		return nil, "", false
	}
	return p, topic, true
}

// httpPrincipal checks the request's Origin and bearer token, answering
// the refusal itself (false) when they do not pass.
func (g *Gateway) httpPrincipal(w http.ResponseWriter, r *http.Request, transport string) (Principal, bool) {
	if !g.cfg.originAllowed(r.Header.Get("Origin"), r.Host) {
		writeHTTPError(w, wire.Errorf(wire.CodeForbidden, "origin not allowed"))
		return nil, false
	}
	p, err := g.authenticateHTTP(r)
	if err != nil {
		code, _ := wire.FromError(err, wire.CodeBadToken)
		g.authFailed(transport, code)
		if code == wire.CodeUnauthorized || code == wire.CodeBadToken {
			w.Header().Set("WWW-Authenticate", `Bearer realm="eventhub"`)
		}
		writeHTTPError(w, err)
		return nil, false
	}
	return p, true
}

// authenticateHTTP checks the bearer token, if authentication is on.
func (g *Gateway) authenticateHTTP(r *http.Request) (Principal, error) {
	if !g.cfg.AuthConfigured() {
		return AllowAll, nil
	}
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, wire.Errorf(wire.CodeUnauthorized, "missing bearer token")
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.cfg.RequestTimeout)
	defer cancel()
	p, err := g.auth.Authenticate(ctx, strings.TrimSpace(token))
	if err == nil && p == nil {
		err = wire.ErrBadToken
	}
	if err != nil {
		_, msg := wire.FromError(err, wire.CodeBadToken)
		return nil, &facade.Error{Code: wire.CodeBadToken, Msg: msg}
	}
	return p, nil
}

// publishOptions reads the allow-listed Eventhub-* headers.
func publishOptions(h http.Header) (facade.PublishOptions, error) {
	var o facade.PublishOptions
	o.Key = h.Get(HeaderKey)
	o.ID = h.Get(HeaderID)
	o.SID = h.Get(HeaderSID)
	o.Tags = splitList(h.Values(HeaderTags))
	o.CausedBy = splitList(h.Values(HeaderCausedBy))
	if v := h.Get(HeaderTS); v != "" {
		ts, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return o, wire.Errorf(wire.CodeBadRequest, "%s: want epoch milliseconds, not %q", HeaderTS, v)
		}
		o.TS = ts
	}
	if v := h.Get(HeaderPartition); v != "" {
		p, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return o, wire.Errorf(wire.CodeBadRequest, "%s: want an integer, not %q", HeaderPartition, v)
		}
		o.Partition = &p
	}
	if v := h.Get(HeaderExpectedLastSeq); v != "" {
		seq, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return o, wire.Errorf(wire.CodeBadRequest, "%s: want a stream position (0 or more), not %q", HeaderExpectedLastSeq, v)
		}
		o.ExpectedLastSeq = &seq
	}
	if v := h.Get(HeaderTTLSeconds); v != "" {
		ttl, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || ttl < 1 {
			return o, wire.Errorf(wire.CodeBadRequest, "%s: want whole seconds, 1 or more, not %q", HeaderTTLSeconds, v)
		}
		o.TTLSeconds = ttl
	}
	for name, vs := range h {
		if len(name) <= len(HeaderHeaderPrefix) || !strings.EqualFold(name[:len(HeaderHeaderPrefix)], HeaderHeaderPrefix) {
			continue
		}
		if o.Headers == nil {
			o.Headers = make(map[string]string)
		}
		o.Headers[strings.ToLower(name[len(HeaderHeaderPrefix):])] = strings.Join(vs, ", ")
	}
	return o, nil
}

// splitList splits comma-separated header values, dropping empty items.
func splitList(vs []string) []string {
	var out []string
	for _, v := range vs {
		for item := range strings.SplitSeq(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
	}
	return out
}

func writeHTTPError(w http.ResponseWriter, err error) {
	writeHTTPErrorCode(w, err, wire.CodeInternal)
}

func writeHTTPErrorCode(w http.ResponseWriter, err error, fallback string) {
	code, msg := wire.FromError(err, fallback)
	var body httpError
	body.Error.Code, body.Error.Msg = code, msg
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(wire.HTTPStatus(code))
	_ = json.NewEncoder(w).Encode(body)
}
