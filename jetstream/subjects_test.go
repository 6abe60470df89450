package jetstream

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
)

func TestKeyEncoding(t *testing.T) {
	tests := []struct{ key, token string }{
		{"host:name:1234", "host:name:1234"},
		{"a.b", "a%2Eb"},
		{"with space", "with%20space"},
		{"100%", "100%25"},
		{"*>", "%2A%3E"},
		{"ü", "%C3%BC"},
		{"slash/back\\", "slash/back\\"},
	}
	for _, tc := range tests {
		if got := EncodeKey(tc.key); got != tc.token {
			t.Errorf("EncodeKey(%q) = %q, want %q", tc.key, got, tc.token)
		}
		if got, err := DecodeKey(tc.token); err != nil || got != tc.key {
			t.Errorf("DecodeKey(%q) = %q, %v", tc.token, got, err)
		}
	}
	for _, bad := range []string{"%", "%4", "%zz"} {
		if _, err := DecodeKey(bad); err == nil {
			t.Errorf("DecodeKey(%q) accepted a bad escape", bad)
		}
	}
}

func FuzzKeyRoundTrip(f *testing.F) {
	for _, s := range []string{"", "host:name:1", "a.b.c", "%", "%%41", " \t\n", "ü✓", "*", ">", "._k."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		tok := EncodeKey(key)
		if strings.ContainsAny(tok, ".*> \t\r\n") {
			t.Fatalf("token %q of %q is not a single literal subject token", tok, key)
		}
		for i := 0; i < len(tok); i++ {
			if tok[i] < 0x21 || tok[i] > 0x7e {
				t.Fatalf("token %q has byte %#x", tok, tok[i])
			}
		}
		back, err := DecodeKey(tok)
		if err != nil || back != key {
			t.Fatalf("round trip of %q: %q, %v", key, back, err)
		}
		if key != "" && utf8.ValidString(key) {
			topic, k := splitSubject(subjectFor("a.b", key))
			if topic != "a.b" || k != key {
				t.Fatalf("subject of %q splits into %q, %q", key, topic, k)
			}
		}
	})
}

// TestTopicConfigByPattern: a topic takes the first configured pattern
// that matches it, in NATS syntax once the bus translated it.
func TestTopicConfigByPattern(t *testing.T) {
	c := Config{Topics: natsTopics([]TopicConfig{{Pattern: "a.b"}, {Pattern: "a.*"}, {Pattern: "x.**"}, {Pattern: "**"}})}
	tests := []struct{ topic, want string }{
		{"a.b", "a.b"},
		{"a.c", "a.*"},
		{"a.b.c", ">"},
		{"x.y.z", "x.>"},
		{"x", ">"},
	}
	for _, tc := range tests {
		if got := c.topicConfig(tc.topic).Pattern; got != tc.want {
			t.Errorf("topicConfig(%q) from pattern %q, want %q", tc.topic, got, tc.want)
		}
	}
}

func TestSynthID(t *testing.T) {
	// covered end to end by the conformance suite; here the bit layout.
	for _, seq := range []uint64{1, 2, 1 << 40, 1<<62 - 1} {
		id := synthID(timeMs(1_700_000_000_123), seq)
		got, ok := synthSeq(id)
		if !ok || got != seq {
			t.Fatalf("synthSeq(synthID(%d)) = %d, %v (%s)", seq, got, ok, id)
		}
	}
	if _, ok := synthSeq("01a204db-9096-7abc-8000-000000000001"); ok {
		t.Fatal("a random uuidv7 was taken for a synthesised id")
	}
}

func TestTranslateUnavailable(t *testing.T) {
	for _, err := range []error{nats.ErrDisconnected, jetstream.ErrTooManyStalledMsgs, jetstream.ErrAsyncPublishTimeout, nats.ErrNoResponders} {
		if got := translate(fmt.Errorf("x: %w", err)); !errors.Is(got, facade.ErrUnavailable) {
			t.Errorf("translate(%v) = %v, want ErrUnavailable", err, got)
		}
	}
}

func TestNatsPattern(t *testing.T) {
	for in, want := range map[string]string{
		"orders.created": "orders.created",
		"orders.*":       "orders.*",
		"orders.**":      "orders.>",
		"orders.>":       "orders.>",
		"*.x.**":         "*.x.>",
		"**":             ">",
	} {
		if got, err := natsPattern(in); err != nil || got != want {
			t.Errorf("natsPattern(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a.**.c", "**.a", "a.>.b", "a.b*", "a..b", "a.b c"} {
		if got, err := natsPattern(in); err == nil {
			t.Errorf("natsPattern(%q) = %q, want an error", in, got)
		}
	}
}
