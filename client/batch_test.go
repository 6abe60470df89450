package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/wire"
)

// The client asks for batched frames unless NoBatch, and reads the frames
// of a batch as if they came one by one.
func TestBatchNegotiation(t *testing.T) {
	for _, noBatch := range []bool{false, true} {
		asked := make(chan bool, 1)
		up := websocket.Upgrader{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ws, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer ws.Close()
			batch := false
			for {
				_, data, err := ws.ReadMessage()
				if err != nil {
					return
				}
				var f wire.Frame
				if err := wire.Decode(data, &f); err != nil {
					t.Errorf("client sent %q: %v", data, err)
					return
				}
				switch f.Op {
				case wire.OpAuth:
					batch = f.Batch
					asked <- f.Batch
					_ = ws.WriteMessage(websocket.TextMessage, wire.AppendOK(nil, f.Corr))
				case wire.OpPublish:
					ok := wire.AppendPublishOK(nil, f.Corr, "id-1", 7, 1)
					if batch {
						// The answer behind a frame of no request.
						msg := append([]byte(`[{"op":"ERR","code":"server_error","msg":"noise"},`), ok...)
						ok = append(msg, ']')
					}
					_ = ws.WriteMessage(websocket.TextMessage, ok)
				}
			}
		}))
		c := dialClient(t, "ws"+srv.URL[len("http"):], Config{NoBatch: noBatch, NoReconnect: true})
		if got := <-asked; got == noBatch {
			t.Errorf("NoBatch %v: AUTH batch %v", noBatch, got)
		}
		rec, err := c.Publish(context.Background(), "a.b", json.RawMessage(`1`), facade.PublishOptions{})
		if err != nil || rec.ID != "id-1" || rec.Seq != 7 {
			t.Errorf("NoBatch %v: publish: %+v, %v", noBatch, rec, err)
		}
		c.Close()
		srv.Close()
	}
}
