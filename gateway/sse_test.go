package gateway

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sseStream is one open GET /sse/{topic}.
type sseStream struct {
	t    *testing.T
	resp *http.Response
	r    *bufio.Reader
}

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct{ id, event, data string }

func openSSE(t *testing.T, url string, header http.Header) (*sseStream, int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return &sseStream{t: t, resp: resp, r: bufio.NewReader(resp.Body)}, resp.StatusCode
}

// next reads one event (skipping comments).
func (s *sseStream) next() sseEvent {
	s.t.Helper()
	var ev sseEvent
	done := make(chan error, 1)
	go func() {
		for {
			line, err := s.r.ReadString('\n')
			if err != nil {
				done <- err
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case line == "":
				if ev.event != "" || ev.data != "" {
					done <- nil
					return
				}
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			s.t.Fatalf("read SSE: %v", err)
		}
	case <-time.After(10 * time.Second):
		s.t.Fatal("no SSE event")
	}
	return ev
}

// TestSSEFollowAndResume: GET /sse/{topic} streams live events with their
// position as the id; a stream that comes back with Last-Event-ID gets
// what it missed, then live.
func TestSSEFollowAndResume(t *testing.T) {
	bus := newBus(t)
	g := newGateway(t, bus, Config{})
	s, code := openSSE(t, g.http+"/sse/sse.t", nil)
	if code != http.StatusOK || s.resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", code, s.resp.Header.Get("Content-Type"))
	}
	if ev := s.next(); ev.event != "ready" {
		t.Fatalf("first event %+v, want ready", ev)
	}
	a := publish(t, bus, "sse.t", `{"n":1}`)
	ev := s.next()
	if ev.event != "event" || ev.id != strconv.FormatUint(a.Seq, 10) || !strings.Contains(ev.data, a.ID) {
		t.Fatalf("event %+v, want id %d with %s", ev, a.Seq, a.ID)
	}
	s.resp.Body.Close()
	b := publish(t, bus, "sse.t", `{"n":2}`)
	c := publish(t, bus, "sse.t", `{"n":3}`)
	s2, _ := openSSE(t, g.http+"/sse/sse.t", http.Header{"Last-Event-Id": {ev.id}})
	// What was missed comes first, then ready, then the live events.
	var got []string
	for {
		e := s2.next()
		if e.event == "ready" {
			if !strings.Contains(e.data, `"recovered":true`) {
				t.Fatalf("ready %s, want recovered", e.data)
			}
			break
		}
		got = append(got, e.data)
	}
	if len(got) != 2 {
		t.Fatalf("resumed with %d events, want 2", len(got))
	}
	if !strings.Contains(got[0], b.ID) || !strings.Contains(got[1], c.ID) {
		t.Fatalf("resumed with %v, want %s then %s", got, b.ID, c.ID)
	}
	d := publish(t, bus, "sse.t", `{"n":4}`)
	if e := s2.next(); !strings.Contains(e.data, d.ID) {
		t.Fatalf("live after resume: %+v", e)
	}
}

// TestSSEAuth: the token comes in the Authorization header or as
// access_token; the topic needs the subscribe right.
func TestSSEAuth(t *testing.T) {
	bus := newBus(t)
	auth := AuthenticatorFunc(func(_ context.Context, token string) (Principal, error) {
		if token != "reader" {
			return nil, errors.New("unknown token")
		}
		return testPrincipal{sub: []string{"open."}}, nil
	})
	g := newGateway(t, bus, Config{Authenticator: auth})
	for _, c := range []struct {
		url    string
		header http.Header
		want   int
	}{
		{"/sse/open.t", nil, http.StatusUnauthorized},
		{"/sse/open.t?access_token=wrong", nil, http.StatusUnauthorized},
		{"/sse/closed.t?access_token=reader", nil, http.StatusForbidden},
		{"/sse/open.t?since=x&access_token=reader", nil, http.StatusBadRequest},
		{"/sse/open.t?access_token=reader", nil, http.StatusOK},
		{"/sse/open.t", http.Header{"Authorization": {"Bearer reader"}}, http.StatusOK},
	} {
		if _, code := openSSE(t, g.http+c.url, c.header); code != c.want {
			t.Errorf("%s %v: status %d, want %d", c.url, c.header, code, c.want)
		}
	}
}
