// Package pgtest runs a throwaway PostgreSQL server for tests: the server
// binaries installed on the machine (Debian's postgresql package), a data
// directory in a temporary directory, a free loopback port, and a fresh
// database per test.
//
// A package whose tests share one server calls [Run] from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }
//
// and each test calls [Start] for the DSN of its own empty database. Without
// Run, Start starts a server for the test alone and stops it in t.Cleanup.
//
// When the binaries are missing, Start fails the test with the command that
// installs them (scripts/postgres.sh does the same); it never skips.
//
// The server runs with fsync off: it is fast and it loses everything on a
// crash, which is what tests want. When the test binary runs as root, the
// server runs as the "postgres" system user (initdb refuses root), in a
// temporary directory handed to that user.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"
)

// InstallCommand is the command that installs the PostgreSQL server binaries
// on Debian and Ubuntu (what scripts/postgres.sh runs).
const InstallCommand = "apt-get update && apt-get install -y postgresql"

// ErrNotInstalled is returned when the PostgreSQL server binaries are not
// found.
var ErrNotInstalled = errors.New("pgtest: PostgreSQL server binaries (initdb, postgres) not found")

// BinDirEnv names the environment variable that, when set, is the only
// directory searched for initdb and postgres.
const BinDirEnv = "PGTEST_BIN_DIR"

// Server is a running PostgreSQL server. Its methods are safe for concurrent
// use.
type Server struct {
	dir     string
	port    int
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	logPath string

	admin   *sql.DB
	dbs     atomic.Int64
	stopMu  sync.Mutex
	stopped bool
}

// shared is the server of a test binary whose TestMain called Run.
var shared struct {
	enabled atomic.Bool
	once    sync.Once
	srv     *Server
	err     error
}

// Run runs the tests of m with one server shared by every [Start] of the
// test binary, started on first use, and stops it when the tests are done.
// It returns m.Run's exit code; call it from TestMain.
func Run(m *testing.M) int {
	shared.enabled.Store(true)
	code := m.Run()
	if shared.srv != nil {
		if err := shared.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest: stop server:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Start returns the DSN (postgres://...) of a new, empty database for the
// test, on the shared server when the test binary's TestMain called [Run], on
// a server of the test's own (stopped in t.Cleanup) otherwise. It fails the
// test when the server cannot be started, naming [InstallCommand] when the
// binaries are missing.
func Start(t testing.TB) string {
	t.Helper()
	var srv *Server
	if shared.enabled.Load() {
		shared.once.Do(func() { shared.srv, shared.err = StartServer() })
		if shared.err != nil {
			t.Fatal(shared.err)
		}
		srv = shared.srv
	} else {
		var err error
		srv, err = StartServer()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := srv.Stop(); err != nil {
				t.Errorf("pgtest: stop server: %v", err)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn, err := srv.CreateDatabase(ctx, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// FindBinDir returns the directory holding initdb and postgres: $PGTEST_BIN_DIR
// when set, else the newest /usr/lib/postgresql/*/bin, else the directory of
// initdb on $PATH. Errors wrap [ErrNotInstalled] and name [InstallCommand].
func FindBinDir() (string, error) {
	has := func(dir string) bool {
		for _, b := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if d := os.Getenv(BinDirEnv); d != "" {
		if has(d) {
			return d, nil
		}
		return "", fmt.Errorf("%w in $%s=%s; install them with: %s (or run scripts/postgres.sh)",
			ErrNotInstalled, BinDirEnv, d, InstallCommand)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { // newest major version first
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("%w (looked in /usr/lib/postgresql/*/bin and $PATH); install them with: %s (or run scripts/postgres.sh)",
		ErrNotInstalled, InstallCommand)
}

// StartServer initialises a data directory in a new temporary directory and
// starts a server on a free loopback port, waiting until it accepts
// connections. The caller must call [Server.Stop].
func StartServer() (*Server, error) {
	bin, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	cred, owner, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: temp dir: %w", err)
	}
	if owner != nil {
		if err := os.Chown(dir, owner[0], owner[1]); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: hand %s to the postgres user: %w", dir, err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Env = serverEnv()
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	var lastErr error
	for range 3 { // a free port can be taken between choosing and binding it
		s, err := startPostgres(bin, dir, cred)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

// serverUser returns the credential to run the server with: nil when the
// process is not root, the "postgres" user's when it is (with its uid and
// gid, to hand it the temporary directory).
func serverUser() (*syscall.Credential, *[2]int, error) {
	if os.Geteuid() != 0 {
		return nil, nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, nil, fmt.Errorf("pgtest: running as root needs the 'postgres' system user (initdb refuses root); it comes with the package: %s: %w", InstallCommand, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil, nil, fmt.Errorf("pgtest: postgres user has ids %s:%s", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, &[2]int{uid, gid}, nil
}

func serverEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "LANG=C", "LC_ALL=C", "TZ=UTC"}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startPostgres(bin, dir string, cred *syscall.Credential) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("pgtest: free port: %w", err)
	}
	logPath := filepath.Join(dir, fmt.Sprintf("postgres-%d.log", port))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("pgtest: log file: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(filepath.Join(bin, "postgres"),
		"-D", filepath.Join(dir, "data"),
		"-p", strconv.Itoa(port),
		"-k", dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=400",
		"-c", "shared_buffers=64MB",
	)
	cmd.Env = serverEnv()
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Pdeathsig: an abandoned server (test binary killed) shuts down too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("pgtest: start postgres: %w", err)
	}
	s := &Server{dir: dir, port: port, cmd: cmd, exited: make(chan struct{}), logPath: logPath}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(30 * time.Second); err != nil {
		s.kill()
		return nil, err
	}
	return s, nil
}

// waitReady polls until the server accepts connections, it exits, or the
// deadline passes.
func (s *Server) waitReady(timeout time.Duration) error {
	db, err := sql.Open("pgx", s.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil {
			s.admin = db
			return nil
		}
		if time.Now().After(deadline) {
			db.Close()
			return fmt.Errorf("pgtest: server on port %d not ready after %v: %w\n%s", s.port, timeout, err, s.logTail())
		}
		select {
		case <-s.exited:
			db.Close()
			return fmt.Errorf("pgtest: postgres exited: %v\n%s", s.waitErr, s.logTail())
		case <-tick.C:
		}
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Port returns the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// Dir returns the server's temporary directory (data, socket and log).
func (s *Server) Dir() string { return s.dir }

// DSN returns the URL of database db on the server, as the superuser
// "postgres" (trust authentication, no TLS).
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// CreateDatabase creates a new, empty database named after name (made a
// valid identifier, with a unique suffix) and returns its DSN.
func (s *Server) CreateDatabase(ctx context.Context, name string) (string, error) {
	db := dbName(name, s.dbs.Add(1))
	if _, err := s.admin.ExecContext(ctx, `CREATE DATABASE `+db); err != nil {
		return "", fmt.Errorf("pgtest: create database %s: %w", db, err)
	}
	return s.DSN(db), nil
}

// dbName maps a test name to a database name: lower-case letters, digits and
// '_', at most 40 bytes of the name, then the sequence number n.
func dbName(name string, n int64) string {
	var b strings.Builder
	b.WriteString("t_")
	for i := 0; i < len(name) && b.Len() < 42; i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b.WriteByte(c)
		case c >= 'A' && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		default:
			b.WriteByte('_')
		}
	}
	return fmt.Sprintf("%s_%d", b.String(), n)
}

// Stop shuts the server down (fast shutdown: open sessions are
// disconnected), waits for it to exit and removes its directory. It is safe
// to call more than once.
func (s *Server) Stop() error {
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	if s.admin != nil {
		s.admin.Close()
	}
	var err error
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		err = fmt.Errorf("pgtest: postgres did not stop within 30s; killed\n%s", s.logTail())
		s.kill()
	}
	if rmErr := os.RemoveAll(s.dir); rmErr != nil && err == nil {
		err = fmt.Errorf("pgtest: remove %s: %w", s.dir, rmErr)
	}
	return err
}

// kill ends the server's process group at once and waits for it.
func (s *Server) kill() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
}
