package hashid

import "testing"

// The ids are stored and deduplicated across restarts and versions: these
// values must never change.
func TestIDsAreStable(t *testing.T) {
	for _, c := range []struct{ name, got, want string }{
		{"V8", V8("0190a6c1-7d2e-7c3a-9b1f-000000000001", "billing"), "66ddad3c-72bd-8a3d-ae06-84f05ac80211"},
		{"V8 redrive", V8("redrive", "0190a6c1-7d2e-7c3a-9b1f-000000000001"), "bf03dd18-00fa-8e61-9fcc-f611e6b3dc84"},
		{"V7", V7(1_700_000_000_123, "eventhub-snapshot", "x.snapshot", "order-17"), "018bcfe5-687b-7e55-a5d8-270784a88201"},
		{"V7Seq", V7Seq(1_700_000_000_123, 0xE4B, 42), "018bcfe5-687b-7e4b-8000-00000000002a"},
		{"V7Pos", V7Pos(1_700_000_000_123, 0xC, Tag30("orders"), 42), "018bcfe5-687b-7cc9-9e96-ec000000002a"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %s, want %s", c.name, c.got, c.want)
		}
	}
}

func TestSeqOfV7(t *testing.T) {
	for _, seq := range []uint64{1, 42, 1<<62 - 1} {
		id := V7Seq(1_700_000_000_123, 0xE4B, seq)
		if got, ok := SeqOfV7(id, 0xE4B); !ok || got != seq {
			t.Fatalf("SeqOfV7(V7Seq(%d)) = %d, %v (%s)", seq, got, ok, id)
		}
		if _, ok := SeqOfV7(id, 0xE4C); ok {
			t.Fatalf("SeqOfV7 with another marker accepted %s", id)
		}
	}
	if _, ok := SeqOfV7(V7(1, "a"), 0xE4B); ok {
		t.Fatal("SeqOfV7 accepted a hashed id")
	}
}

func TestPosOfV7(t *testing.T) {
	for _, c := range []struct {
		tag uint32
		seq uint64
	}{{0, 1}, {Tag30("orders"), 42}, {1<<30 - 1, 1<<40 - 1}, {12345, 1 << 40}} {
		id := V7Pos(1_700_000_000_123, 0xC, c.tag, c.seq)
		tag, seq, ok := PosOfV7(id, 0xC)
		if !ok || tag != c.tag || seq != c.seq&(1<<40-1) {
			t.Fatalf("PosOfV7(V7Pos(%d, %d)) = %d, %d, %v (%s)", c.tag, c.seq, tag, seq, ok, id)
		}
		if _, _, ok := PosOfV7(id, 0xE); ok {
			t.Fatalf("PosOfV7 with another marker accepted %s", id)
		}
	}
	if _, _, ok := PosOfV7(V7Seq(1, 0xE4B, 7), 0xC); ok {
		t.Fatal("PosOfV7 accepted a V7Seq id")
	}
}
