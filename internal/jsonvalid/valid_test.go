package jsonvalid

import (
	"encoding/json"
	"strings"
	"testing"
)

var cases = []string{
	``, ` `, `1`, `-0`, `-`, `01`, `1.`, `1.5e`, `1.5e+3`, `1E-2`, `-0.0e0`, `.5`, `+1`,
	`"a"`, `"`, `"\"`, `"\u00e9"`, `"\u00g9"`, `"\x"`, "\"\x01\"", "\"\x7f\xff\"", `"abcdefgh\"ijklmnop"`,
	`true`, `tru`, `truex`, `false`, `null`, `nul`,
	`[]`, `[1,]`, `[,1]`, `[1 2]`, `[[[]]]`, `[`, `]`, `{}`, `{"a":1}`, `{"a":}`, `{"a" 1}`, `{a:1}`,
	`{"a":1,}`, `{"a":[1,{"b":null}]}`, `{"a":1}{}`, `1 2`, " \t\r\n{}\n", `{"a":"b","c":[true,false]}`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	`"` + strings.Repeat("long string with no escapes ", 40) + `"`,
}

func TestAgainstEncodingJSON(t *testing.T) {
	for _, c := range cases {
		if got, want := Valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("Valid(%.40q) = %v, encoding/json says %v", c, got, want)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

func BenchmarkValid1KiB(b *testing.B) {
	payload := []byte(`{"host":"dev","name":"stt","pid":1234,"cpu_pct":12.5,"note":"` + strings.Repeat("x", 900) + `","tags":["a","b"]}`)
	b.Run("jsonvalid", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			Valid(payload)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			json.Valid(payload)
		}
	})
}
