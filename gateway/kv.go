package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/wire"
)

// HTTP headers of DELETE /publish/{topic}, besides Eventhub-Key (the key
// to delete) and Eventhub-Expected-Last-Seq (compare-and-delete).
const (
	// HeaderPurge: "true" also removes the key's earlier events
	// (facade.DeleteOptions.Purge).
	HeaderPurge = "Eventhub-Purge"
)

// deleteKey is the DELETE frame: a tombstone for f.Key on f.Topic, which
// needs the right to publish to the topic. It is answered like a PUBLISH,
// with the tombstone's id, seq and ts.
func (s *session) deleteKey(f *wire.Frame) error {
	if err := facade.ValidateTopic(f.Topic); err != nil {
		return err
	}
	if err := s.allow(ActionPublish, f.Topic, ""); err != nil {
		return err
	}
	var o facade.DeleteOptions
	if err := wire.DecodeOpts(f.Opts, &o); err != nil {
		return err
	}
	ctx, cancel := s.reqCtx()
	defer cancel()
	rec, err := s.gw.deleteKey(s.gw.bind(ctx, s.principal), s.principal, f.Topic, f.Key, o)
	if err != nil {
		return err
	}
	s.sendPublishOK(f.Corr, rec)
	return nil
}

// deleteKey deletes key of topic for p, counted as a publish by the
// limiter; wire.ErrUnsupported when the bus cannot delete keys.
func (g *Gateway) deleteKey(ctx context.Context, p Principal, topic, key string, o facade.DeleteOptions) (*facade.EventRecord, error) {
	kd, ok := g.bus.(facade.KeyDeleter)
	if !ok {
		return nil, fmt.Errorf("%w: deleting keys", wire.ErrUnsupported)
	}
	if o.Purge && !isAdmin(p) {
		// A tombstone leaves the key's history; erasing it is an operator's
		// act, as purging a topic is.
		return nil, wire.Errorf(wire.CodeForbidden, "purging the history of a key of %s takes the admin scope; a delete without purge needs the publish right alone", topic)
	}
	if err := g.limitPublish(p, topic, 0); err != nil {
		return nil, err
	}
	return kd.DeleteKey(ctx, topic, key, o)
}

// serveDelete is DELETE /publish/{topic}: deletes the key of Eventhub-Key
// (a tombstone), with Eventhub-Purge and Eventhub-Expected-Last-Seq as its
// options. It needs the right to publish to the topic and answers like
// POST, with the tombstone's id, seq and ts.
func (g *Gateway) serveDelete(w http.ResponseWriter, r *http.Request) {
	p, topic, ok := g.httpTopic(w, r, "http", ActionPublish)
	if !ok {
		return
	}
	key := r.Header.Get(HeaderKey)
	if key == "" {
		writeHTTPError(w, wire.Errorf(wire.CodeBadKey, "%s: the key to delete is required", HeaderKey))
		return
	}
	var o facade.DeleteOptions
	if v := strings.TrimSpace(r.Header.Get(HeaderPurge)); v != "" {
		purge, err := strconv.ParseBool(v)
		if err != nil {
			writeHTTPError(w, wire.Errorf(wire.CodeBadRequest, "%s: want true or false, not %q", HeaderPurge, v))
			return
		}
		o.Purge = purge
	}
	pub, err := publishOptions(r.Header)
	if err != nil {
		writeHTTPError(w, err)
		return
	}
	o.ExpectedLastSeq = pub.ExpectedLastSeq
	ctx, cancel := context.WithTimeout(g.bind(r.Context(), p), g.cfg.RequestTimeout)
	defer cancel()
	rec, err := g.deleteKey(ctx, p, topic, key, o)
	if err != nil {
		setRetryAfter(w, err)
		writeHTTPErrorCode(w, err, wire.CodePublishFailed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(publishResponse{ID: rec.ID, Seq: rec.Seq, TS: rec.TS})
}
