package ops_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/ops"
)

// TestRedriveStaysOnItsTopic: a redrive publishes to the topic whose
// dead-letter topic was named, never to one a dead letter's dlq_topic
// header names. Whoever may publish to orders.created.dlq can write that
// header; a redrive that followed it would publish into payments.refund
// for them.
func TestRedriveStaysOnItsTopic(t *testing.T) {
	e := newEnv(t, jetstream.Config{}, ops.Config{})
	publish(t, e.bus, "orders.created", `1`, "")
	publish(t, e.bus, "payments.refund", `0`, "")
	if _, err := e.bus.Publish(t.Context(), "orders.created.dlq", json.RawMessage(`{"refund":1000000}`),
		facade.PublishOptions{Headers: map[string]string{"dlq_topic": "payments.refund", "dlq_group": "billing"}}); err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	e.mustCall(t, "POST", "/admin/deadletters/redrive?topic=orders.created&all=true", &out)
	if n, err := e.bus.Admin().TopicCount(t.Context(), "payments.refund"); err != nil || n != 1 {
		t.Fatalf("payments.refund holds %d events (%v) after a redrive of orders.created, want 1; answer %v", n, err, out)
	}
	if n, err := e.bus.Admin().TopicCount(t.Context(), "orders.created"); err != nil || n != 2 {
		t.Fatalf("orders.created holds %d events (%v) after the redrive, want 2", n, err)
	}
}

// TestAdminReadsLogAtDebug: the console polls the admin API's reads every
// few seconds; they are logged at debug, actions at info.
func TestAdminReadsLogAtDebug(t *testing.T) {
	e, _ := newFakeEnv(t, ops.Config{}, "adm.lvl")
	e.mustCall(t, "GET", "/admin/topics?topic=adm.lvl", nil)
	e.mustCall(t, "POST", "/admin/topics/purge?topic=adm.lvl&upTo=seq:1", nil)
	recs := e.logs.findAll("admin call")
	if len(recs) != 2 {
		t.Fatalf("%d admin call records, want 2: %v", len(recs), recs)
	}
	if r := recs[0]; r.attrs["method"] != "GET" || r.level != slog.LevelDebug {
		t.Errorf("a read logged as %v %v, want debug", r.level, r.attrs)
	}
	if r := recs[1]; r.attrs["method"] != "POST" || r.level != slog.LevelInfo {
		t.Errorf("an action logged as %v %v, want info", r.level, r.attrs)
	}
}

// TestAdminAuditRedactsCredentials: a token passed in the query of an
// admin call (as EventSource users are used to) never reaches the audit
// log; and a retention the store cannot hold is refused, not wrapped.
func TestAdminAuditRedactsCredentials(t *testing.T) {
	e, f := newFakeEnv(t, ops.Config{}, "adm.audit")
	e.mustCall(t, "GET", "/admin/topics?topic=adm.audit&access_token=sekrit-123", nil)
	r, err := e.logs.find("admin call")
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(r); strings.Contains(s, "sekrit-123") || !strings.Contains(s, "REDACTED") {
		t.Fatalf("audit record %s", s)
	}
	for _, v := range []string{"NaN", "1e300", "-1", "36501"} {
		if s := e.call(t, "POST", "/admin/topics?topic=adm.audit2&retentionDays="+v, nil); s != http.StatusBadRequest {
			t.Errorf("retentionDays=%s: %d, want 400", v, s)
		}
	}
	if n := f.changes.Load(); n != 0 {
		t.Errorf("%d changes reached the bus", n)
	}
}
