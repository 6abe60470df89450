package hub

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
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
		return fmt.Errorf("hub: %s listener: %w", name, err)
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
