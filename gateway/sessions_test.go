package gateway

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/wire"
)

// named is a principal with a name, as auth.Identity is.
type named struct{ Principal }

func (named) Name() string { return "svc-a" }

func TestSessionsAndDisconnect(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{Authenticator: AuthenticatorFunc(func(_ context.Context, tok string) (Principal, error) {
		return named{AllowAll}, nil
	})})
	a := dialAuth(t, g.url, "tok")
	publish(t, bus, "sess.t", `{"n":1}`)
	a.ok(subscribeFrame("sess.t", "workers", `{"from":"earliest"}`))
	a.mustEvent() // one in flight, not acked
	b := dialAuth(t, g.url, "tok")

	list := g.Sessions()
	if len(list) != 2 || list[0].ID >= list[1].ID {
		t.Fatalf("sessions: %+v", list)
	}
	s := list[0]
	if s.Principal != "svc-a" || s.Remote == "" || s.StartedMs == 0 || s.InFlight != 1 ||
		len(s.Subscriptions) != 1 || s.Subscriptions[0].Topic != "sess.t" || s.Subscriptions[0].Group != "workers" {
		t.Errorf("first session: %+v", s)
	}
	if g.Disconnect(999) {
		t.Error("disconnected a session that does not exist")
	}
	if !g.Disconnect(s.ID) {
		t.Fatal("Disconnect found no session")
	}
	if code := a.waitClose(10 * time.Second); code != wire.CloseDisconnected {
		t.Errorf("close code %d, want %d", code, wire.CloseDisconnected)
	}
	// The other session is untouched.
	b.ok(wire.Frame{Op: wire.OpAuth, Token: "tok"})
	other := list[1].ID
	testutil.CheckFor(t, 10*time.Second, func() error {
		if list := g.Sessions(); len(list) != 1 || list[0].ID != other {
			return fmt.Errorf("after the disconnect: %+v", list)
		}
		return nil
	})
}
