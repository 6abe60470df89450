package hub_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/limits"
)

// TestEveryCreationCountsAgainstTheQuotas: a principal that created as
// many topics and groups as its quotas allow (one each) is refused a new
// one on every way the hub can create a topic or a group, with the
// quota's own error, and nothing is created: WebSocket PUBLISH,
// SUBSCRIBE (and a fan-in over listed topics or a topic family), SEEK, a
// live subscription, HTTP publish, an event stream, and the admin API's
// declare. CURSOR creates nothing: a cursor of a group that does not exist
// is not_found.
func TestEveryCreationCountsAgainstTheQuotas(t *testing.T) {
	h := startHub(t, hub.Config{NATS: hub.NATSConfig{Memory: true, Port: -1}, Auth: auth.Config{JWT: auth.VerifierConfig{Secret: secret}}, Bus: jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "qfam.>", Stream: "QFAM"}}}, Limits: limits.Config{Quotas: limits.Quotas{Topics: 1, Groups: 1}}})
	ctx := t.Context()
	tok, err := auth.MintHS256(secret, auth.MintClaims{Subject: "quinn", Scopes: []string{"publish:**", "subscribe:**", "admin"}, TTL: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, h, tok)
	// The principal's one topic and one group.
	if _, err := c.Publish(ctx, "q.base", json.RawMessage(`{}`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	nop := func(context.Context, facade.Delivery) error { return nil }
	sub, err := c.Subscribe(ctx, "q.base", "g0", nop, facade.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// The family's stream exists (the operator's, counted for no one).
	if _, err := h.Bus.Publish(ctx, "qfam.a", []byte(`{}`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}

	httpCall := func(method, url string) error {
		req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(`{}`))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var e struct {
			Error struct{ Code, Msg string }
		}
		if resp.StatusCode < 300 || json.Unmarshal(body, &e) != nil {
			return errors.New(resp.Status + ": " + string(body))
		}
		return &facade.Error{Code: e.Error.Code, Msg: e.Error.Msg}
	}
	for _, tc := range []struct {
		path         string
		topic, group string // what it would create
		want         error
		try          func() error
	}{
		{"PUBLISH", "q.pub", "", facade.ErrTopicQuota, func() error {
			_, err := c.Publish(ctx, "q.pub", json.RawMessage(`{}`), facade.PublishOptions{})
			return err
		}},
		{"SUBSCRIBE to a new topic", "q.sub", "g0", facade.ErrTopicQuota, func() error {
			_, err := c.Subscribe(ctx, "q.sub", "g0", nop, facade.SubscribeOptions{})
			return err
		}},
		{"SUBSCRIBE as a new group", "q.base", "gsub", facade.ErrGroupQuota, func() error {
			_, err := c.Subscribe(ctx, "q.base", "gsub", nop, facade.SubscribeOptions{})
			return err
		}},
		{"fan-in over listed topics", "q.fanin", "g0", facade.ErrTopicQuota, func() error {
			_, err := c.Subscribe(ctx, "q.base", "g0", nop, facade.SubscribeOptions{Topics: []string{"q.fanin"}})
			return err
		}},
		{"fan-in over a topic family", "qfam.*", "gfam", facade.ErrGroupQuota, func() error {
			_, err := c.Subscribe(ctx, "qfam.*", "gfam", nop, facade.SubscribeOptions{})
			return err
		}},
		{"SEEK on a new topic", "q.seek", "g0", facade.ErrTopicQuota, func() error {
			return c.SetCursor(ctx, "q.seek", "g0", facade.CursorPosition{})
		}},
		{"SEEK of a new group", "q.base", "gseek", facade.ErrGroupQuota, func() error {
			return c.SetCursor(ctx, "q.base", "gseek", facade.CursorPosition{})
		}},
		{"CURSOR", "q.cursor", "g0", facade.ErrNotFound, func() error {
			_, err := c.GetCursor(ctx, "q.cursor", "g0")
			return err
		}},
		{"live SUBSCRIBE", "q.live", "", facade.ErrTopicQuota, func() error {
			_, err := c.Follow(ctx, "q.live", 0, func(*facade.EventRecord) {})
			return err
		}},
		{"HTTP publish", "q.http", "", facade.ErrTopicQuota, func() error {
			return httpCall(http.MethodPost, "http://"+h.Addr("http")+"/publish/q.http")
		}},
		{"SSE", "q.sse", "", facade.ErrTopicQuota, func() error {
			return httpCall(http.MethodGet, "http://"+h.Addr("ws")+"/sse/q.sse")
		}},
		{"admin declare", "q.admin", "", facade.ErrTopicQuota, func() error {
			return httpCall(http.MethodPost, "http://"+h.Addr("ops")+"/admin/topics?topic=q.admin")
		}},
	} {
		if err := tc.try(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.path, err, tc.want)
		}
		// Nothing was created.
		if tc.want != facade.ErrGroupQuota {
			if _, err := h.Bus.Topic(ctx, tc.topic); !errors.Is(err, facade.ErrNotFound) {
				t.Errorf("%s: topic %s after the refusal: %v, want not_found", tc.path, tc.topic, err)
			}
		} else if _, err := h.Bus.Admin().Group(ctx, tc.topic, tc.group); !errors.Is(err, facade.ErrNotFound) {
			t.Errorf("%s: group %s of %s after the refusal: %v, want not_found", tc.path, tc.group, tc.topic, err)
		}
	}
}
