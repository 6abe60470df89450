package watermill_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/eventhub/eventhub/internal/benchcmp"
)

// These are the jetstream package's benchmark helpers, so that the figures
// here read like the ones of its benchmarks.

const benchWindow = 4000

// contestant is one path of a comparison (see benchcmp.Compare).
type contestant = benchcmp.Contestant

func compareAll(b *testing.B, unit string, cs ...contestant) { benchcmp.Compare(b, unit, cs...) }

// payloadOf is a JSON string payload of size bytes.
func payloadOf(size int) json.RawMessage {
	return json.RawMessage(`"` + strings.Repeat("x", size-2) + `"`)
}
