package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/eventhub/eventhub/wire"
)

// TestRefusedAuthReachesAPipeliningClient: a client that sends frames right
// behind an AUTH the gateway refuses reads ERR bad_token and the close frame
// with 4500, every time, so that it can tell not to reconnect. The gateway
// takes in what the client sent until the client answers its close: a
// connection closed with frames unread ends in a reset, which makes clients
// that see it first (node's ws) report 1006 without the frames before it.
func TestRefusedAuthReachesAPipeliningClient(t *testing.T) {
	// The AUTH is refused, not timed out, however long a loaded machine
	// takes to get to it.
	g := newGateway(t, newBus(t), Config{Token: "the-right-token-0123", AuthTimeout: time.Minute})
	const tries = 100
	var wg sync.WaitGroup
	errs := make(chan error, tries)
	sem := make(chan struct{}, 4)
	for i := range tries {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := refusedAuthWithPipelinedFrames(t, g.url, i); err != nil {
				errs <- fmt.Errorf("try %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 5 {
			t.Error(err)
		}
	}
	if n > 0 {
		t.Fatalf("%d of %d tries failed", n, tries)
	}
}

// refusedAuthWithPipelinedFrames sends AUTH with a wrong token and then
// frames, without waiting for an answer, until the gateway's close frame is
// read (gorilla answers it, then refuses further writes with ErrCloseSent).
func refusedAuthWithPipelinedFrames(t *testing.T, url string, i int) error {
	c, _, err := dialRaw(t, url, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"op":"AUTH","token":"wrong-token-0123456789","corr":"a"}`)); err != nil {
		return err
	}
	writeErr := make(chan error, 1)
	go func() {
		for j := 0; ; j++ {
			f := fmt.Sprintf(`{"op":"PUBLISH","topic":"pipe.t","payload":{"i":%d,"j":%d},"corr":"p%d"}`, i, j, j)
			if err := c.WriteMessage(websocket.TextMessage, []byte(f)); err != nil {
				writeErr <- err
				return
			}
		}
	}()
	readErr := readRefusal(c)
	werr := <-writeErr
	if readErr != nil {
		return fmt.Errorf("%w (the writes ended with %v)", readErr, werr)
	}
	if !errors.Is(werr, websocket.ErrCloseSent) {
		return fmt.Errorf("the writes ended with %v before the close handshake, want %v after it", werr, websocket.ErrCloseSent)
	}
	return nil
}

// readRefusal reads ERR bad_token, then the close frame with 4500.
func readRefusal(c *websocket.Conn) error {
	var sawErr bool
	for {
		_, b, err := c.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			switch {
			case !errors.As(err, &ce):
				return fmt.Errorf("read ended with %v (ERR seen: %v), want close %d", err, sawErr, wire.CloseBadToken)
			case ce.Code != wire.CloseBadToken:
				return fmt.Errorf("close %d %q, want %d", ce.Code, ce.Text, wire.CloseBadToken)
			case !sawErr:
				return errors.New("closed without ERR bad_token first")
			}
			return nil
		}
		var f wire.Frame
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("frame %s: %w", b, err)
		}
		if f.Op != wire.OpErr || f.Code != wire.CodeBadToken {
			return fmt.Errorf("frame %s, want ERR bad_token", b)
		}
		sawErr = true
	}
}
