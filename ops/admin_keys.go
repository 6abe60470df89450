package ops

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/eventhub/eventhub/facade"
)

// adminDeleteKey deletes ?key= of ?topic=: a tombstone (facade.KeyDeleter),
// after which latest-by-key answers 404 and snapshots leave the key out;
// with ?purge=true the key's earlier events are removed too, with
// ?expectedLastSeq=<n> only if the key's newest event is still at n (409
// wrong_last_seq otherwise). Answers the tombstone's id, seq and ts.
func (h *Handler) adminDeleteKey(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	ti, err := h.lookupTopic(ctx, r)
	if err != nil {
		return err
	}
	key, err := param(r, "key")
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var o facade.DeleteOptions
	if v := q.Get("purge"); v != "" {
		if o.Purge, err = strconv.ParseBool(v); err != nil {
			return fmt.Errorf("%w: purge: want true or false, not %q", ErrBadRequest, v)
		}
	}
	if v := q.Get("expectedLastSeq"); v != "" {
		seq, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: expectedLastSeq: want a stream position (0 or more), not %q", ErrBadRequest, v)
		}
		o.ExpectedLastSeq = &seq
	}
	e, err := h.keys.DeleteKey(ctx, ti.Topic, key, o)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"topic": ti.Topic, "key": key, "id": e.ID, "seq": e.Seq, "ts": e.TS, "purged": o.Purge})
	return nil
}
