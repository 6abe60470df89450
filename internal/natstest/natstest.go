// Package natstest starts real NATS servers for tests: embedded in the test
// process, or as a separate nats-server process built from the same module
// version the project depends on.
package natstest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// RunEmbedded starts an in-process nats-server with JetStream file storage in
// a temporary directory and no client port, and stops it at cleanup.
func RunEmbedded(t testing.TB) *server.Server {
	t.Helper()
	return RunEmbeddedIn(t, t.TempDir(), -1)
}

// RunEmbeddedIn starts an embedded server storing in dir, listening on
// loopback port (-1: no listener, 0: a random one).
func RunEmbeddedIn(t testing.TB, dir string, port int) *server.Server {
	t.Helper()
	opts := &server.Options{
		ServerName: "test",
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		NoSigs:     true,
		NoLog:      true,
	}
	switch port {
	case -1:
		opts.DontListen = true
	case 0:
		opts.Port = server.RANDOM_PORT
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("natstest: new server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("natstest: embedded server not ready")
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv
}

// InProcessConn connects to an embedded server without a socket.
func InProcessConn(t testing.TB, srv *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	if err != nil {
		t.Fatalf("natstest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary returns the path of a nats-server binary built from the module
// version in go.mod (cached in the user cache directory between runs).
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv("EVENTHUB_NATS_SERVER"); p != "" {
			buildPath = p
			return
		}
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		dir = filepath.Join(dir, "eventhub", "nats-server-"+serverVersion())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		p := filepath.Join(dir, "nats-server")
		if _, err := os.Stat(p); err == nil {
			buildPath = p
			return
		}
		cmd := exec.Command("go", "build", "-o", p+".tmp", "github.com/nats-io/nats-server/v2")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			buildErr = fmt.Errorf("go build nats-server: %v\n%s", err, out.String())
			return
		}
		buildErr = os.Rename(p+".tmp", p)
		buildPath = p
	})
	if buildErr != nil {
		t.Fatalf("natstest: %v", buildErr)
	}
	return buildPath
}

func serverVersion() string { return server.VERSION }

// Process is a nats-server running as a separate process.
type Process struct {
	t    testing.TB
	bin  string
	Dir  string
	Port int
	cmd  *exec.Cmd
	log  *bytes.Buffer
	mu   sync.Mutex
	// conf, env and ready: see StartProcessConfig.
	conf  string
	env   []string
	ready []nats.Option
}

// StartProcessConfig starts nats-server like StartProcess, with the
// configuration file conf (its port and store directory are overridden)
// and env added to its environment (a config file reads $NAME from it).
// Readiness is checked with a connection made with ready (its credentials).
func StartProcessConfig(t testing.TB, conf string, env []string, ready ...nats.Option) *Process {
	t.Helper()
	p := &Process{t: t, bin: Binary(t), Dir: t.TempDir(), Port: freePort(t), conf: conf, env: env, ready: ready}
	p.Start()
	t.Cleanup(p.Stop)
	return p
}

// StartProcess starts nats-server with JetStream on a free loopback port,
// storing in a temporary directory; it is killed at cleanup.
func StartProcess(t testing.TB) *Process {
	t.Helper()
	p := &Process{t: t, bin: Binary(t), Dir: t.TempDir(), Port: freePort(t)}
	p.Start()
	t.Cleanup(p.Stop)
	return p
}

// URL is the client URL of the process.
func (p *Process) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(p.Port) }

// Start starts the process (again, after Stop) on the same port and store.
func (p *Process) Start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = &bytes.Buffer{}
	args := []string{"-js", "-a", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-sd", p.Dir, "-n", "ext"}
	if p.conf != "" {
		args = append([]string{"-c", p.conf}, args...)
	}
	p.cmd = exec.Command(p.bin, args...)
	p.cmd.Env = append(os.Environ(), p.env...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("natstest: start nats-server: %v", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		nc, err := nats.Connect(p.URL(), append([]nats.Option{nats.Timeout(time.Second)}, p.ready...)...)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err = nc.RequestWithContext(ctx, "$JS.API.INFO", nil)
			cancel()
			nc.Close()
			if err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("natstest: nats-server not ready: %v\n%s", err, p.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the process (SIGKILL: what a crash looks like) and waits for it.
func (p *Process) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.cmd = nil
}

// Restart stops the process gracefully (SIGTERM) and starts it again on the
// same port and store.
func (p *Process) Restart() {
	p.mu.Lock()
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		_ = p.cmd.Wait()
		p.cmd = nil
	}
	p.mu.Unlock()
	p.Start()
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natstest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
