package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/eventhub/eventhub/facade"
)

func TestSplitBatch(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		code string
	}{
		{`[{"op":"ACK","id":"a"},{"op":"ACK","id":"b"}]`, []string{`{"op":"ACK","id":"a"}`, `{"op":"ACK","id":"b"}`}, ""},
		{" [ {\"op\":\"ACK\"} ,\n{} ] ", []string{`{"op":"ACK"}`, `{}`}, ""},
		{`[{"op":"EVENT","event":{"payload":[1,{"a":"]"}]}}]`, []string{`{"op":"EVENT","event":{"payload":[1,{"a":"]"}]}}`}, ""},
		{`[]`, nil, CodeBadFrame},
		{`[1]`, nil, CodeBadFrame},
		{`[{},"x"]`, []string{`{}`}, CodeBadFrame},
		{`{"op":"ACK"}`, nil, CodeBadJSON},
		{`[{}`, []string{`{}`}, CodeBadJSON},
		{`[{},]`, []string{`{}`}, CodeBadJSON},
		{`[{}]x`, []string{`{}`}, CodeBadJSON},
		{`[{} {}]`, []string{`{}`}, CodeBadJSON},
		{`[{"a":}]`, []string{`{"a":}`}, ""}, // Decode refuses it
		{`[{"a":"}\"]"},{}]`, []string{`{"a":"}\"]"}`, `{}`}, ""},
		{`[{"a":"}`, nil, CodeBadJSON},
		{``, nil, CodeBadJSON},
	} {
		var got []string
		err := SplitBatch([]byte(c.in), func(f []byte) bool {
			got = append(got, string(f))
			return true
		})
		if code := codeOf(err); code != c.code {
			t.Errorf("%q: error %v, want code %q", c.in, err, c.code)
		}
		if len(got) != len(c.want) {
			t.Errorf("%q: frames %q, want %q", c.in, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%q: frame %d %q, want %q", c.in, i, got[i], c.want[i])
			}
		}
	}
	// fn stops the split.
	n := 0
	if err := SplitBatch([]byte(`[{},{},{}]`), func([]byte) bool { n++; return n < 2 }); err != nil || n != 2 {
		t.Errorf("stopped split: n %d, err %v", n, err)
	}
}

func codeOf(err error) string {
	if err == nil {
		return ""
	}
	var fe *facade.Error
	if errors.As(err, &fe) {
		return fe.Code
	}
	return "not a *facade.Error: " + err.Error()
}

// FuzzSplitBatch: SplitBatch never panics, fails only with bad_json or
// bad_frame, and splits a valid array of objects into exactly the objects
// encoding/json sees in it; what it accepts with valid frames is such an
// array.
func FuzzSplitBatch(f *testing.F) {
	for _, s := range []string{
		`[{"op":"EVENT","topic":"a","event":{"id":"i","ts":1,"topic":"a","payload":{"x":"]}"},"seq":3}},{"op":"OK","corr":"1"}]`,
		`[{"op":"ACK","topic":"a","group":"g","id":"x","attempt":1},{"op":"NACK","topic":"a","group":"g","id":"y","reason":"no"}]`,
		` [ {} , {"a":[1,2]} ] `, `[]`, `[1]`, `[{}`, `[{},]`, `[{}]]`, `{"op":"ACK"}`, "[{\"a\":\"\xff\"}]", `[[{}]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got [][]byte
		err := SplitBatch(data, func(fr []byte) bool {
			got = append(got, fr)
			return true
		})
		if err != nil {
			if code := codeOf(err); code != CodeBadJSON && code != CodeBadFrame {
				t.Fatalf("%q: error %v", data, err)
			}
		}
		framesValid := true
		for _, fr := range got {
			if len(fr) == 0 || fr[0] != '{' {
				t.Fatalf("%q: frame %q does not start an object", data, fr)
			}
			framesValid = framesValid && json.Valid(fr) && utf8.Valid(fr)
		}
		var want []json.RawMessage
		valid := json.Valid(data) && utf8.Valid(data) && json.Unmarshal(data, &want) == nil && len(want) > 0
		for _, w := range want {
			if w[0] != '{' {
				valid = false
			}
		}
		if depth := bytes.Count(data, []byte("[")) + bytes.Count(data, []byte("{")); depth > 64 {
			return // scanValue's depth bound
		}
		// SplitBatch checks the array, Decode the frames: together they
		// accept exactly the arrays of objects.
		if valid != (err == nil && framesValid) {
			t.Fatalf("%q: error %v, frames valid %v, encoding/json sees an array of objects: %v", data, err, framesValid, valid)
		}
		if !valid {
			return
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d frames, want %d", data, len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("%q: frame %d %q, want %q", data, i, got[i], want[i])
			}
		}
	})
}

// TestBatchDocExamples: the frames of docs/protocol.md's "Batched frames"
// are batches and frames as the gateway and the Go client write them.
func TestBatchDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Batched frames\n")
	if !ok {
		t.Fatal("docs/protocol.md has no section Batched frames")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	batches := 0
	for line := range strings.Lines(section) {
		line = strings.TrimSpace(line)
		msg, ok := strings.CutPrefix(line, "→ ")
		if !ok {
			if msg, ok = strings.CutPrefix(line, "← "); !ok {
				continue
			}
		}
		var frames [][]byte
		if IsBatch([]byte(msg)) {
			batches++
			if err := SplitBatch([]byte(msg), func(f []byte) bool { frames = append(frames, f); return true }); err != nil {
				t.Fatalf("%s: %v", msg, err)
			}
		} else {
			frames = [][]byte{[]byte(msg)}
		}
		for _, b := range frames {
			var f Frame
			if err := Decode(b, &f); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			var want []byte
			switch f.Op {
			case OpEvent:
				want = AppendEvent(nil, f.Topic, f.Group, f.Event, f.Ctx.Attempt, f.Ctx.AckDeadlineMs)
			case OpAck:
				want = AppendAck(nil, f.Op, f.Corr, f.Topic, f.Group, f.ID, f.Attempt, f.Reason, f.ExtendMs)
			default:
				want, _ = Encode(&f)
			}
			if f.Op != OpAuth && !bytes.Equal(b, want) {
				t.Errorf("example frame\n%s\nis written\n%s", b, want)
			}
		}
	}
	if batches != 2 {
		t.Errorf("%d batches in the examples, want 2 (EVENTs from the gateway, ACKs from the client)", batches)
	}
}
