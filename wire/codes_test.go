package wire

import (
	"os"
	"strings"
	"testing"

	"github.com/eventhub/eventhub/facade"
)

func TestCodeTable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Codes() {
		if seen[c.Code] {
			t.Errorf("duplicate code %s", c.Code)
		}
		seen[c.Code] = true
		if c.Close != 0 && c.Close != CloseGoingAway && (c.Close < 4000 || c.Close > 4999) {
			t.Errorf("%s: close code %d outside 4000-4999", c.Code, c.Close)
		}
		if !c.ERR && c.Close == 0 && c.HTTPStatus == 0 {
			t.Errorf("%s: neither ERR nor close nor HTTP", c.Code)
		}
	}
	// Every facade sentinel's code is in the table.
	for _, e := range []*facade.Error{facade.ErrBadTopic, facade.ErrBadGroup, facade.ErrBadPayload, facade.ErrBadKey,
		facade.ErrBadID, facade.ErrInvalidOption, facade.ErrKeyRequired, facade.ErrWrongLastSeq, facade.ErrUnknownID, facade.ErrNotFound,
		ErrNotSubscribed, facade.ErrTooLarge, facade.ErrUnavailable, facade.ErrClosed} {
		if !seen[e.Code] {
			t.Errorf("facade code %s missing from the table", e.Code)
		}
	}
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), CodesMarkdown()) {
		t.Errorf("docs/protocol.md does not contain the current code table; paste:\n%s", CodesMarkdown())
	}
}
