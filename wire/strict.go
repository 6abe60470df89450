package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/eventhub/eventhub/facade"
)

// Frames are decoded exactly. encoding/json matches field names without
// regard to case and lets the last of duplicate keys win, so a proxy that
// inspects "topic" could see another frame than the hub (one that also
// carries "Topic"). strictKeys refuses both before encoding/json runs.

// schema lists an object's field names and, for those holding objects
// whose names are checked too, their schemas.
type schema struct {
	fields map[string]*schema // nil value: the field's content is not checked
}

// schemaOf builds the schema of a struct type from its json tags, descending
// into the nested types given.
func schemaOf(t reflect.Type, nested map[string]*schema) *schema {
	s := &schema{fields: map[string]*schema{}}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		s.fields[name] = nested[name]
	}
	return s
}

// The schemas of what clients and the gateway send; built once, read only.
var (
	cursorSchema    = schemaOf(reflect.TypeFor[facade.CursorPosition](), nil)
	subscribeSchema = schemaOf(reflect.TypeFor[facade.SubscribeOptions](), map[string]*schema{
		"retry": schemaOf(reflect.TypeFor[facade.RetryPolicy](), nil),
	})
	publishSchema = schemaOf(reflect.TypeFor[facade.PublishOptions](), nil)
	deleteSchema  = schemaOf(reflect.TypeFor[facade.DeleteOptions](), nil)
	liveSchema    = schemaOf(reflect.TypeFor[LiveOptions](), map[string]*schema{
		"since": schemaOf(reflect.TypeFor[LivePosition](), nil),
	})
	traceSchema = schemaOf(reflect.TypeFor[facade.TraceContext](), nil)
	frameSchema = schemaOf(reflect.TypeFor[Frame](), map[string]*schema{
		"cursor": cursorSchema,
		"event":  schemaOf(reflect.TypeFor[facade.EventRecord](), nil),
		"ctx":    schemaOf(reflect.TypeFor[EventContext](), map[string]*schema{"trace": traceSchema}),
		"trace":  traceSchema,
	})
)

// strictKeys returns a bad_frame error when the JSON object data (or a
// nested object the schema names) has a duplicate key, or a key that is
// not one of the schema's names but equals one but for case. Unknown keys
// are ignored, as encoding/json ignores them. Anything that is not a
// well-formed object is left to the decoder to report.
func strictKeys(data []byte, s *schema, where string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := make(map[string]bool, 8)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		k, _ := tok.(string)
		if seen[k] {
			return Errorf(CodeBadFrame, "%sduplicate key %q", where, k)
		}
		seen[k] = true
		nested, known := s.fields[k]
		if !known {
			for name := range s.fields {
				if strings.EqualFold(name, k) {
					return Errorf(CodeBadFrame, "%skey %q: field names are case-sensitive (%q)", where, k, name)
				}
			}
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if nested != nil {
			if err := strictKeys(v, nested, where+k+"."); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeOpts decodes the opts of a frame exactly into v (a
// *facade.SubscribeOptions, *facade.PublishOptions or *facade.DeleteOptions).
func DecodeOpts(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return nil
	}
	s := subscribeSchema
	switch v.(type) {
	case *facade.PublishOptions:
		s = publishSchema
	case *facade.DeleteOptions:
		s = deleteSchema
	case *LiveOptions:
		s = liveSchema
	}
	if err := strictKeys(raw, s, "opts."); err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return Errorf(CodeBadFrame, "opts: %v", err)
	}
	return nil
}

// checkUTF8 refuses a frame that is not valid UTF-8, naming what holds the
// bad bytes: encoding/json would silently turn them into U+FFFD in strings
// (a different key, group or corr than the client sent) and keep them in
// raw payloads, which browsers then refuse to receive.
func checkUTF8(data []byte, f *Frame) error {
	if utf8.Valid(data) {
		return nil
	}
	if !utf8.Valid(f.Payload) {
		return Errorf(CodeBadPayload, "payload is not valid UTF-8")
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) == nil {
		if raw, ok := fields["opts"]; ok && !utf8.Valid(raw) {
			var opts map[string]json.RawMessage
			if json.Unmarshal(raw, &opts) == nil {
				if key, ok := opts["key"]; ok && !utf8.Valid(key) {
					return Errorf(CodeBadKey, "opts.key is not valid UTF-8")
				}
			}
			return Errorf(CodeBadRequest, "opts is not valid UTF-8")
		}
		for name, raw := range fields {
			if !utf8.Valid(raw) || !utf8.ValidString(name) {
				if name == "corr" {
					f.Corr = "" // the client would not recognise it
				}
				return Errorf(CodeBadRequest, "%s is not valid UTF-8", strings.ToValidUTF8(name, "?"))
			}
		}
	}
	return Errorf(CodeBadRequest, "frame is not valid UTF-8")
}
