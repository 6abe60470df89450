package hub

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The configuration file's YAML, written and checked by walking the Config
// struct: its yaml tags name the keys, so the keys that are read, written,
// listed in the example and refused when unknown are the same.

var durationType = reflect.TypeFor[time.Duration]()

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

func valueOf(v any) reflect.Value { return reflect.ValueOf(v) }

// yamlKey returns the key of a struct field, whether it is inlined, and
// whether the file has it at all.
func yamlKey(f reflect.StructField) (key string, inline, ok bool) {
	if !f.IsExported() {
		return "", false, false
	}
	tag := f.Tag.Get("yaml")
	if tag == "-" {
		return "", false, false
	}
	name, opts, _ := strings.Cut(tag, ",")
	if opts == "inline" {
		return "", true, true
	}
	if name == "" {
		name = strings.ToLower(f.Name) // yaml's own rule
	}
	return name, false, true
}

// isSection reports whether values of t are written as a nested mapping.
func isSection(t reflect.Type) bool { return t.Kind() == reflect.Struct && t != durationType }

// checkKeys reports the first key of the mapping n that t does not have,
// naming it by its path ("gateway.maxInflight", "topics[2].patern").
func checkKeys(n *yaml.Node, t reflect.Type, path string) error {
	switch {
	case isSection(t) && n.Kind == yaml.MappingNode:
		known := map[string]reflect.Type{}
		collectKeys(t, known)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			ft, ok := known[k.Value]
			if !ok {
				return fmt.Errorf("line %d: %w %q", k.Line, ErrUnknownKey, p)
			}
			if err := checkKeys(v, ft, p); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, e := range n.Content {
			if err := checkKeys(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil // a kind mismatch is the decoder's to report
}

func collectKeys(t reflect.Type, into map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		key, inline, ok := yamlKey(f)
		switch {
		case !ok:
		case inline:
			collectKeys(f.Type, into)
		default:
			into[key] = f.Type
		}
	}
}

// yamlWriter writes struct values as YAML, in field order. With doc set,
// each key is preceded by its documentation as comments, and an empty list
// of structs is followed by a commented-out element showing its keys.
type yamlWriter struct {
	b   *bytes.Buffer
	doc func(t reflect.Type, field int) string
}

func (w *yamlWriter) fields(v reflect.Value, indent int) {
	t := v.Type()
	for i := range t.NumField() {
		key, inline, ok := yamlKey(t.Field(i))
		if !ok {
			continue
		}
		if w.doc != nil {
			doc := w.doc(t, i)
			if indent == 0 && doc != "" && w.b.Len() > 0 {
				w.b.WriteString("\n") // a blank line between top-level keys
			}
			w.comment(doc, indent)
		}
		if inline {
			w.fields(v.Field(i), indent)
			continue
		}
		w.keyValue(key, v.Field(i), indent)
	}
}

func (w *yamlWriter) comment(text string, indent int) {
	if text == "" {
		return
	}
	pad := strings.Repeat("  ", indent)
	for l := range strings.SplitSeq(strings.TrimRight(text, "\n"), "\n") {
		w.b.WriteString(strings.TrimRight(pad+"# "+l, " ") + "\n")
	}
}

func (w *yamlWriter) keyValue(key string, v reflect.Value, indent int) {
	pad := strings.Repeat("  ", indent)
	t := v.Type()
	switch {
	case isSection(t):
		fmt.Fprintf(w.b, "%s%s:\n", pad, key)
		w.fields(v, indent+1)
	case t.Kind() == reflect.Slice && isSection(t.Elem()):
		if v.Len() > 0 {
			fmt.Fprintf(w.b, "%s%s:\n", pad, key)
			for j := range v.Len() {
				w.item(v.Index(j), indent+1, "")
			}
			return
		}
		fmt.Fprintf(w.b, "%s%s: []\n", pad, key)
		if w.doc != nil {
			w.item(reflect.Zero(t.Elem()), indent+1, "# ")
		}
	default:
		fmt.Fprintf(w.b, "%s%s: %s\n", pad, key, scalar(v))
	}
}

// item writes one element of a list of structs, each line prefixed by
// prefix ("# " comments it out).
func (w *yamlWriter) item(v reflect.Value, indent int, prefix string) {
	var sub bytes.Buffer
	(&yamlWriter{b: &sub, doc: w.doc}).fields(v, 0)
	pad := strings.Repeat("  ", indent-1)
	for i, l := range strings.Split(strings.TrimSuffix(sub.String(), "\n"), "\n") {
		lead := "  "
		if i == 0 {
			lead = "- "
		}
		w.b.WriteString(pad + prefix + lead + l + "\n")
	}
}

// scalar formats a value that is not a section: durations as "1m30s",
// strings quoted when YAML needs it, lists of scalars in flow style.
func scalar(v reflect.Value) string {
	if v.Type() == durationType {
		return formatDuration(time.Duration(v.Int()))
	}
	switch v.Kind() {
	case reflect.String:
		if v.String() == "" {
			return `""`
		}
		b, err := yaml.Marshal(v.String())
		if err != nil {
			return strconv.Quote(v.String())
		}
		return strings.TrimSuffix(string(b), "\n")
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // a secret
			return scalar(reflect.ValueOf(string(v.Bytes())))
		}
		items := make([]string, v.Len())
		for i := range items {
			items[i] = scalar(v.Index(i))
		}
		return "[" + strings.Join(items, ", ") + "]"
	}
	return strconv.Quote(fmt.Sprint(v.Interface()))
}

// formatDuration writes d as time.Duration.String does, without its zero
// units: "1m" rather than "1m0s", "1h" rather than "1h0m0s".
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
