package facade_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/pattern"
)

func TestValidateTopic(t *testing.T) {
	tests := []struct {
		topic   string
		wantErr bool
	}{
		{"heartbeat.received", false},
		{"process.state.snapshot", false},
		{"a", false},
		{"Upper-case_and:colon.x1", false},
		{"", true},
		{".a", true},
		{"a.", true},
		{"a..b", true},
		{"a.*", true},
		{"a.>", true},
		{"a b", true},
		{"a._k", true},
		{"_x", true},
		{"ü", true},
		{"a/b", true},
		{strings.Repeat("a", 65), true},
		{strings.Repeat("a.", 16) + "a", true},
		{strings.Repeat("abcdefghij.", 23) + "abcdefghij", true}, // 263 bytes
	}
	for _, tc := range tests {
		err := facade.ValidateTopic(tc.topic)
		if (err != nil) != tc.wantErr {
			t.Errorf("ValidateTopic(%q) = %v, want error %v", tc.topic, err, tc.wantErr)
		}
		if err != nil && !errors.Is(err, facade.ErrBadTopic) {
			t.Errorf("ValidateTopic(%q) error %v does not wrap ErrBadTopic", tc.topic, err)
		}
	}
}

// TestTopicErrorNamesTheCharacter: a character outside ASCII is reported
// as the character typed, not as one of its bytes.
func TestTopicErrorNamesTheCharacter(t *testing.T) {
	for topic, want := range map[string]string{
		"orders.ä":    `character 'ä' not allowed (ASCII letters`,
		"orders.a b":  `character ' ' not allowed`,
		"orders.\xff": `byte 0xff (not UTF-8) not allowed`,
	} {
		err := facade.ValidateTopic(topic)
		if !errors.Is(err, facade.ErrBadTopic) || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateTopic(%q) = %v, want one containing %s", topic, err, want)
		}
	}
}

func TestValidatePattern(t *testing.T) {
	tests := []struct {
		pattern string
		wantErr bool
		isPat   bool
	}{
		{"orders.created", false, false},
		{"orders.*", false, true},
		{"orders.**", false, true},
		{"*.created", false, true},
		{"a.**.c", false, true}, // valid syntax; the bus refuses it (NATS cannot filter on it)
		{"a.>", true, false},
		{"a.b*", true, false},
		{"a.***", true, false},
		{"a..*", true, true},
		{"a._k.*", true, true},
		{"", true, false},
		{strings.Repeat("*.", 16) + "*", true, true},
	}
	for _, tc := range tests {
		err := facade.ValidatePattern(tc.pattern)
		if (err != nil) != tc.wantErr {
			t.Errorf("ValidatePattern(%q) = %v, want error %v", tc.pattern, err, tc.wantErr)
		}
		if err != nil && !errors.Is(err, facade.ErrBadTopic) {
			t.Errorf("ValidatePattern(%q) error %v does not wrap ErrBadTopic", tc.pattern, err)
		}
		if got := pattern.HasWildcard(tc.pattern); got != tc.isPat {
			t.Errorf("HasWildcard(%q) = %v, want %v", tc.pattern, got, tc.isPat)
		}
	}
	if err := facade.ValidatePattern("a.>"); err == nil || !strings.Contains(err.Error(), `"**"`) {
		t.Errorf("a \">\" pattern: %v, want a hint to use **", err)
	}
	// Publishes still refuse patterns; subscribe options take them.
	if err := facade.ValidateTopic("orders.*"); err == nil {
		t.Error("ValidateTopic accepted a pattern")
	}
	if err := (facade.SubscribeOptions{Topics: []string{"orders.**"}}).Validate(); err != nil {
		t.Errorf("SubscribeOptions.Topics with a pattern: %v", err)
	}
}

func TestValidateGroupAndKey(t *testing.T) {
	for _, g := range []string{"ops", "a.b:c/d", "ünïcode"} {
		if err := facade.ValidateGroup(g); err != nil {
			t.Errorf("group %q: %v", g, err)
		}
	}
	for _, g := range []string{"", "a b", "tab\t", strings.Repeat("g", 129), "\xff"} {
		if err := facade.ValidateGroup(g); !errors.Is(err, facade.ErrBadGroup) {
			t.Errorf("group %q: %v, want ErrBadGroup", g, err)
		}
	}
	for _, k := range []string{"", "host:name:1", "with space", "ü"} {
		if err := facade.ValidateKey(k); err != nil {
			t.Errorf("key %q: %v", k, err)
		}
	}
	for _, k := range []string{"\xff", strings.Repeat("k", facade.MaxKeyLen+1)} {
		if err := facade.ValidateKey(k); !errors.Is(err, facade.ErrBadKey) {
			t.Errorf("key %.20q: %v, want ErrBadKey", k, err)
		}
	}
}

func TestSubscribeOptions(t *testing.T) {
	d := facade.SubscribeOptions{}.WithDefaults()
	if d.From != "latest" || d.BatchSize != 100 || d.MaxInFlight != 1000 || d.AckTimeout() != 30*time.Second || d.MaxAttempts != 5 {
		t.Fatalf("defaults %+v", d)
	}
	bad := []facade.SubscribeOptions{
		{From: "yesterday"}, {From: "ts"}, {From: "afterId"}, {BatchSize: -1}, {MaxInFlight: 1 << 30},
		{AckTimeoutMs: 5}, {MaxAttempts: -2}, {Topics: []string{"bad topic"}},
	}
	for _, o := range bad {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	var o facade.SubscribeOptions
	if err := json.Unmarshal([]byte(`{"from":"afterId","afterId":"x","batchSize":5,"maxInFlight":7,"ackTimeoutMs":1500,"maxAttempts":2,"manualAck":true,"topics":["a.b"]}`), &o); err != nil {
		t.Fatal(err)
	}
	if o.From != "afterId" || o.AfterID != "x" || o.BatchSize != 5 || o.MaxInFlight != 7 || o.AckTimeoutMs != 1500 || o.MaxAttempts != 2 || !o.ManualAck || o.Topics[0] != "a.b" {
		t.Fatalf("the documented option names do not decode: %+v", o)
	}
}

func TestErrorCodes(t *testing.T) {
	err := fmt.Errorf("publish x: %w", fmt.Errorf("%w: details", facade.ErrBadPayload))
	if !errors.Is(err, facade.ErrBadPayload) || errors.Is(err, facade.ErrBadTopic) {
		t.Fatal("errors.Is does not match by code")
	}
	if !errors.Is(&facade.Error{Code: "bad_topic", Msg: "other text"}, facade.ErrBadTopic) {
		t.Fatal("an Error with the same code does not match")
	}
	var fe *facade.Error
	if !errors.As(err, &fe) || fe.Code != "bad_payload" {
		t.Fatalf("code not reachable: %v", fe)
	}
}

func TestIDs(t *testing.T) {
	before := time.Now().Add(-time.Millisecond)
	a, b := facade.NewID(), facade.NewID()
	if a == b || a > b {
		t.Fatalf("ids %s, %s not unique and ordered", a, b)
	}
	ts, ok := facade.IDTime(a)
	if !ok || ts.Before(before.Truncate(time.Millisecond)) || ts.After(time.Now()) {
		t.Fatalf("IDTime(%s) = %v, %v", a, ts, ok)
	}
	if _, ok := facade.IDTime("550e8400-e29b-41d4-a716-446655440000"); ok {
		t.Fatal("a uuidv4 has no time")
	}
	if facade.DeadLetterTopic("a.b") != "a.b.dlq" {
		t.Fatal(facade.DeadLetterTopic("a.b"))
	}
}

type recorder struct{ got json.RawMessage }

func (r *recorder) Publish(_ context.Context, _ string, p json.RawMessage, _ facade.PublishOptions) (*facade.EventRecord, error) {
	r.got = p
	return &facade.EventRecord{Payload: p}, nil
}

func TestTypedHelpers(t *testing.T) {
	type hb struct {
		PID  int    `json:"pid"`
		Name string `json:"name"`
	}
	var r recorder
	if _, err := facade.PublishJSON(t.Context(), &r, "t", hb{1, "stt"}, facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	if string(r.got) != `{"pid":1,"name":"stt"}` {
		t.Fatalf("published %s", r.got)
	}
	var seen hb
	h := facade.HandleJSON(func(_ context.Context, _ facade.Delivery, v hb) error {
		seen = v
		return nil
	})
	if err := h(t.Context(), stubDelivery{&facade.EventRecord{Payload: r.got}}); err != nil || seen.Name != "stt" {
		t.Fatalf("typed handler: %v %+v", err, seen)
	}
	if err := h(t.Context(), stubDelivery{&facade.EventRecord{Payload: json.RawMessage(`"not an object"`)}}); err == nil {
		t.Fatal("a payload of the wrong shape did not fail the delivery")
	}
}

// stubDelivery is a delivery of e that cannot be settled.
type stubDelivery struct{ e *facade.EventRecord }

func (d stubDelivery) Event() *facade.EventRecord                { return d.e }
func (stubDelivery) Group() string                               { return "g" }
func (stubDelivery) Attempt() int                                { return 1 }
func (stubDelivery) MaxAttempts() int                            { return 5 }
func (stubDelivery) Deadline() time.Time                         { return time.Time{} }
func (stubDelivery) Ack(context.Context) error                   { return facade.ErrSettled }
func (stubDelivery) Nack(context.Context, string) error          { return facade.ErrSettled }
func (stubDelivery) Extend(context.Context, time.Duration) error { return facade.ErrSettled }
func (stubDelivery) AfterExpire(func())                          {}

func TestRetryPolicy(t *testing.T) {
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	def := func(p facade.RetryPolicy) facade.RetryPolicy {
		return p.WithDefaults(100*time.Millisecond, 10*time.Second)
	}
	tests := []struct {
		name   string
		p      facade.RetryPolicy
		want   facade.RetryPolicy // with defaults
		delays []time.Duration    // after attempts 1, 2, …
	}{
		{"default", facade.RetryPolicy{}, facade.RetryPolicy{MinBackoffMs: 100, MaxBackoffMs: 10_000},
			[]time.Duration{ms(100), ms(200), ms(400), ms(800)}},
		{"exponential", facade.RetryPolicy{MinBackoffMs: 1000, MaxBackoffMs: 5000}, facade.RetryPolicy{MinBackoffMs: 1000, MaxBackoffMs: 5000},
			[]time.Duration{ms(1000), ms(2000), ms(4000), ms(5000), ms(5000)}},
		{"only a minimum above the default maximum", facade.RetryPolicy{MinBackoffMs: 60_000}, facade.RetryPolicy{MinBackoffMs: 60_000, MaxBackoffMs: 60_000},
			[]time.Duration{ms(60_000), ms(60_000)}},
		{"only a maximum below the default minimum", facade.RetryPolicy{MaxBackoffMs: 50}, facade.RetryPolicy{MinBackoffMs: 50, MaxBackoffMs: 50},
			[]time.Duration{ms(50), ms(50)}},
		{"list", facade.RetryPolicy{BackoffMs: []int64{1000, 5000, 30_000}}, facade.RetryPolicy{BackoffMs: []int64{1000, 5000, 30_000}},
			[]time.Duration{ms(1000), ms(5000), ms(30_000), ms(30_000)}},
		{"a day, doubling far", facade.RetryPolicy{MinBackoffMs: 1, MaxBackoffMs: facade.MaxBackoffMs}, facade.RetryPolicy{MinBackoffMs: 1, MaxBackoffMs: facade.MaxBackoffMs},
			[]time.Duration{ms(1), ms(2), ms(4)}},
	}
	for _, tc := range tests {
		if err := tc.p.Validate(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got := def(tc.p)
		if !got.Equal(tc.want) {
			t.Errorf("%s: with defaults %+v, want %+v", tc.name, got, tc.want)
		}
		for i, want := range tc.delays {
			if d := got.Delay(i + 1); d != want {
				t.Errorf("%s: delay after attempt %d: %v, want %v", tc.name, i+1, d, want)
			}
		}
	}
	if d := def(facade.RetryPolicy{MinBackoffMs: 1, MaxBackoffMs: facade.MaxBackoffMs}).Delay(1000); d != ms(facade.MaxBackoffMs) {
		t.Errorf("delay after attempt 1000: %v, want the maximum", d)
	}

	bad := []facade.RetryPolicy{
		{MinBackoffMs: -1},
		{MaxBackoffMs: facade.MaxBackoffMs + 1},
		{MinBackoffMs: 2000, MaxBackoffMs: 1000},
		{BackoffMs: []int64{}},
		{BackoffMs: []int64{100, 0}},
		{BackoffMs: []int64{100}, MaxBackoffMs: 100},
		{BackoffMs: make([]int64, 101)},
	}
	for _, p := range bad {
		if err := p.Validate(); !errors.Is(err, facade.ErrInvalidOption) {
			t.Errorf("%+v: %v, want ErrInvalidOption", p, err)
		}
		if err := (facade.SubscribeOptions{Retry: &p}).Validate(); !errors.Is(err, facade.ErrInvalidOption) {
			t.Errorf("SubscribeOptions with %+v: %v, want ErrInvalidOption", p, err)
		}
	}
	var o facade.SubscribeOptions
	if err := json.Unmarshal([]byte(`{"retry":{"minBackoffMs":500,"maxBackoffMs":60000}}`), &o); err != nil || o.Retry == nil || o.Retry.MinBackoffMs != 500 || o.Retry.MaxBackoffMs != 60_000 {
		t.Fatalf("opts JSON: %+v, %v", o.Retry, err)
	}
	if s := def(facade.RetryPolicy{}).String(); s != "100ms doubling to 10s" {
		t.Errorf("String: %q", s)
	}
}
