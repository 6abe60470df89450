//go:build unix

package jetstream

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// lockDataDir takes an exclusive lock on dir (created if missing) for the
// life of the returned file: two processes writing one JetStream store
// corrupt it and lose acknowledged events. The lock file names the pid that
// holds it.
func lockDataDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDataDir, err)
	}
	path := filepath.Join(dir, "eventhub.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDataDir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := strings.TrimSpace(string(holder))
			if who == "" {
				who = "another process"
			}
			return nil, fmt.Errorf("%w: %s is used by %s; stop it, or give this hub another data directory", ErrDataDirInUse, dir, who)
		}
		return nil, fmt.Errorf("%w: lock %s: %w", ErrDataDir, path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = fmt.Fprintf(f, "eventhub pid %d\n", os.Getpid())
	}
	return f, nil
}
