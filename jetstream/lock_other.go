//go:build !unix

package jetstream

import (
	"fmt"
	"os"
	"path/filepath"
)

// lockDataDir checks that dir is usable. Without flock, it cannot stop a
// second process from opening the same store: run one hub per directory.
func lockDataDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDataDir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "eventhub.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDataDir, err)
	}
	return f, nil
}
