package jetstream_test

import (
	"testing"

	"github.com/eventhub/eventhub/internal/benchcmp"
)

// contestant is one path of a comparison (see benchcmp.Compare).
type contestant = benchcmp.Contestant

func compareAll(b *testing.B, unit string, cs ...contestant) { benchcmp.Compare(b, unit, cs...) }
