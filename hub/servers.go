package hub

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// listener is one of the hub's HTTP servers.
type listener struct {
	name string
	srv  *http.Server
	ln   net.Listener
}

// servers owns the hub's HTTP listeners.
type servers struct {
	mu   sync.Mutex
	list []*listener
	wg   sync.WaitGroup
}

// serve starts an HTTP server for handler on host:port (0: a free port) with
// non-zero timeouts (slow clients cannot hold connections open forever).
// WebSocket handlers hijack their connections, so the read and write
// timeouts do not apply to them.
func (s *servers) serve(name, host string, port int, handler http.Handler, onErr func(error)) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return portError(name, err)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      0, // replay streams may be long; handlers set their own deadlines
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	l := &listener{name: name, srv: srv, ln: ln}
	s.mu.Lock()
	s.list = append(s.list, l)
	s.mu.Unlock()
	s.wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			onErr(fmt.Errorf("%s server: %w", name, err))
		}
	})
	return nil
}

// ErrPortInUse: a port the hub is to listen on is taken.
var ErrPortInUse = errors.New("port in use")

// portSettings names, for each of the hub's ports, the flag, environment
// variable and file key that set it.
var portSettings = map[string]string{
	"ws":   "-ws-port, $WS_PORT, server.wsPort",
	"http": "-http-port, $HTTP_PORT, server.httpPort",
	"ops":  "-ops-port, $OPS_PORT, server.opsPort",
	"nats": "-nats-port, $EVENTHUB_NATS_PORT, nats.port",
}

// portError is the error of a listener that could not start: it names the
// setting of the port, and says what to do when the port is taken.
func portError(name string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("hub: %s %w (%s): %w (is another hub running? choose another port, or -1 for none)", name, ErrPortInUse, portSettings[name], err)
	}
	return fmt.Errorf("hub: %s listener (%s): %w", name, portSettings[name], err)
}

// addr returns the bound address of the named listener, or "".
func (s *servers) addr(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.list {
		if l.name == name {
			return l.ln.Addr().String()
		}
	}
	return ""
}

// shutdown stops every listener and waits for in-flight requests.
func (s *servers) shutdown(ctx context.Context) error {
	s.mu.Lock()
	list := s.list
	s.mu.Unlock()
	var errs []error
	for _, l := range list {
		if err := l.srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.name, err))
		}
	}
	s.wg.Wait()
	return errors.Join(errs...)
}
