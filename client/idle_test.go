package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/wire"
)

// TestIdleTimeoutDropsASilentConnection: a connection on which frames keep
// arriving stays up past IdleTimeout; once they stop, the client drops it,
// no sooner than IdleTimeout after the last frame. The gateway here is a
// bare WebSocket server that answers AUTH and SUBSCRIBE, sends live events
// for a while, then goes silent (no pings either).
func TestIdleTimeoutDropsASilentConnection(t *testing.T) {
	const idle = 300 * time.Millisecond
	var lastSent atomic.Int64 // unix ns of the server's last frame
	stop := make(chan struct{})
	defer close(stop)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for range 2 { // AUTH, SUBSCRIBE
			var f wire.Frame
			_, data, err := ws.ReadMessage()
			if err != nil || wire.Decode(data, &f) != nil {
				return
			}
			if ws.WriteMessage(websocket.TextMessage, wire.AppendOK(nil, f.Corr)) != nil {
				return
			}
		}
		for i := range 3 * idle / (20 * time.Millisecond) {
			e := &facade.EventRecord{ID: "e", TS: 1, Topic: "idle.t", Payload: []byte("1"), Seq: uint64(i + 1)}
			if ws.WriteMessage(websocket.TextMessage, wire.AppendLiveEvent(nil, e)) != nil {
				return
			}
			lastSent.Store(time.Now().UnixNano())
			select {
			case <-time.After(20 * time.Millisecond):
			case <-stop:
				return
			}
		}
		<-stop
	}))
	defer srv.Close()
	c := dialClient(t, "ws"+strings.TrimPrefix(srv.URL, "http"), Config{IdleTimeout: idle, NoReconnect: true})
	var got atomic.Int64
	sub, err := c.Follow(context.Background(), "idle.t", facade.AfterNow, func(*facade.EventRecord) { got.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the silent connection was not dropped")
	}
	dropped := time.Now()
	if n := got.Load(); n < 3*int64(idle/(20*time.Millisecond)) {
		t.Fatalf("dropped after %d of %d events, while they still arrived", n, 3*idle/(20*time.Millisecond))
	}
	if quiet := dropped.Sub(time.Unix(0, lastSent.Load())); quiet < idle {
		t.Fatalf("dropped %v after the last frame, before IdleTimeout (%v)", quiet, idle)
	}
	if !errors.Is(sub.Err(), facade.ErrUnavailable) {
		t.Fatalf("ended with %v, want facade.ErrUnavailable", sub.Err())
	}
}
