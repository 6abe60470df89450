package ops

import (
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/eventhub/eventhub/facade"
)

func TestParsePosition(t *testing.T) {
	ts := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		in      string
		want    Position
		wantErr error
	}{
		{"", Position{}, nil},
		{"earliest", Position{Kind: PosEarliest}, nil},
		{"latest", Position{Kind: PosLatest}, nil},
		{"Latest", Position{}, ErrBadRequest},
		{"seq:123", Position{Kind: PosSeq, Seq: 123}, nil},
		{"123", Position{Kind: PosSeq, Seq: 123}, nil},
		{"999999999999", Position{Kind: PosSeq, Seq: 999999999999}, nil},
		{"seq:1700000000000", Position{Kind: PosSeq, Seq: 1700000000000}, nil},
		{"1700000000000", Position{}, ErrBadRequest},
		{"seq:0", Position{}, ErrBadRequest},
		{"0", Position{}, ErrBadRequest},
		{"seq:", Position{}, ErrBadRequest},
		{"seq:-1", Position{}, ErrBadRequest},
		{"seq:99999999999999999999", Position{}, ErrBadRequest},
		{"ts:2026-11-22T10:00:00Z", Position{Kind: PosTime, Time: ts}, nil},
		{"2026-11-22T10:00:00Z", Position{Kind: PosTime, Time: ts}, nil},
		{"ts:2026-11-22T11:00:00+01:00", Position{Kind: PosTime, Time: ts}, nil},
		{"ts:2026-11-22T11:00:00 01:00", Position{Kind: PosTime, Time: ts}, nil}, // '+' decoded as space
		{"ts:2026-11-22T10:00:00.5Z", Position{Kind: PosTime, Time: ts.Add(500 * time.Millisecond)}, nil},
		{"ts:" + "1795341600000", Position{Kind: PosTime, Time: time.UnixMilli(1795341600000)}, nil},
		{"ts:2026-11-22", Position{}, ErrBadRequest},
		{"ts:", Position{}, ErrBadRequest},
		{"id:0190a5b6-7c3d-7e4f-8a9b-0c1d2e3f4a5b", Position{Kind: PosID, ID: "0190a5b6-7c3d-7e4f-8a9b-0c1d2e3f4a5b"}, nil},
		{"0190a5b6-7c3d-7e4f-8a9b-0c1d2e3f4a5b", Position{Kind: PosID, ID: "0190a5b6-7c3d-7e4f-8a9b-0c1d2e3f4a5b"}, nil},
		{"id:custom-id-1", Position{Kind: PosID, ID: "custom-id-1"}, nil},
		{"id:", Position{}, ErrBadRequest},
		{"id:has space", Position{}, ErrBadRequest},
		{"custom-id-1", Position{}, ErrBadRequest},
		{"urn:uuid:0190a5b6-7c3d-7e4f-8a9b-0c1d2e3f4a5b", Position{}, ErrBadRequest},
	}
	for _, tc := range tests {
		got, err := ParsePosition(tc.in)
		if !errors.Is(err, tc.wantErr) {
			t.Errorf("%q: err %v, want %v", tc.in, err, tc.wantErr)
			continue
		}
		if err == nil && !samePosition(got, tc.want) {
			t.Errorf("%q: %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func samePosition(a, b Position) bool {
	return a.Kind == b.Kind && a.Seq == b.Seq && a.ID == b.ID && a.Time.Equal(b.Time)
}

func TestParseQuery(t *testing.T) {
	tests := []struct {
		in      string
		want    Query
		wantErr error
	}{
		{"topic=a.b", Query{Topic: "a.b"}, nil},
		{"topic=a.b&from=3&to=seq:9&limit=2", Query{Topic: "a.b", From: Position{Kind: PosSeq, Seq: 3}, To: Position{Kind: PosSeq, Seq: 9}, Limit: 2}, nil},
		{"", Query{}, ErrBadRequest},
		{"topic=a..b", Query{}, facade.ErrBadTopic},
		{"topic=a.b&from=x", Query{}, ErrBadRequest},
		{"topic=a.b&to=x", Query{}, ErrBadRequest},
		{"topic=a.b&limit=-1", Query{}, ErrBadRequest},
		{"topic=a.b&limit=1e3", Query{}, ErrBadRequest},
	}
	for _, tc := range tests {
		v, _ := url.ParseQuery(tc.in)
		got, err := ParseQuery(v)
		if !errors.Is(err, tc.wantErr) {
			t.Errorf("%q: err %v, want %v", tc.in, err, tc.wantErr)
			continue
		}
		if err == nil && (got.Topic != tc.want.Topic || got.Limit != tc.want.Limit ||
			!samePosition(got.From, tc.want.From) || !samePosition(got.To, tc.want.To)) {
			t.Errorf("%q: %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// FuzzParsePosition checks that every accepted position formats back to a
// string that parses to the same position, and that a bare number is a
// sequence only below 10^12.
func FuzzParsePosition(f *testing.F) {
	for _, s := range []string{"", "1", "seq:5", "ts:2026-11-22T10:00:00Z", "ts:1700000000000",
		"2026-11-22T10:00:00.123456789+05:30", "id:abc", "0190a5b6-7c3d-7e4f-8a9b-0c1d2e3f4a5b",
		"1000000000000", "ts:2026-11-22T11:00:00 01:00", "seq:18446744073709551615"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePosition(s)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("%q: error %v does not wrap ErrBadRequest", s, err)
			}
			return
		}
		if s == "" {
			if p.Kind != PosNone {
				t.Fatalf("empty string: %+v", p)
			}
			return
		}
		if p.Kind == PosSeq && p.Seq == 0 {
			t.Fatalf("%q: sequence 0 accepted", s)
		}
		if isDigits(s) && (p.Kind != PosSeq || p.Seq > maxBareSeq) {
			t.Fatalf("%q: bare number parsed as %+v", s, p)
		}
		again, err := ParsePosition(p.String())
		if err != nil {
			t.Fatalf("%q -> %q: %v", s, p.String(), err)
		}
		if !samePosition(again, p) {
			t.Fatalf("%q -> %q -> %+v, want %+v", s, p.String(), again, p)
		}
	})
}
