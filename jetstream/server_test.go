package jetstream_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eventhub/eventhub/jetstream"
)

// TestDataDirLockedAgainstASecondHub: two hubs on one data directory would
// both write the store and lose acknowledged events; the second is refused
// until the first has stopped.
func TestDataDirLockedAgainstASecondHub(t *testing.T) {
	dir := t.TempDir()
	oc := jetstream.OpenConfig{Server: jetstream.ServerConfig{DataDir: dir, Port: -1}}
	a, err := jetstream.Open(t.Context(), oc)
	if err != nil {
		t.Fatal(err)
	}
	pub(t, a, "lock.t", `1`, "")
	if b, err := jetstream.Open(t.Context(), oc); !errors.Is(err, jetstream.ErrDataDirInUse) {
		if b != nil {
			b.Close()
		}
		t.Fatalf("second hub on the same directory: %v, want ErrDataDirInUse", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := jetstream.Open(t.Context(), oc)
	if err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	defer b.Close()
	if e := pub(t, b, "lock.t", `2`, ""); e.Seq != 2 {
		t.Fatalf("seq %d after restart, want 2", e.Seq)
	}
}

// TestStartupFailuresNameTheirCause: each is refused at once with its
// cause, not after a 10 s wait for a server that will never be ready.
func TestStartupFailuresNameTheirCause(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		oc   jetstream.OpenConfig
		want error
	}{
		{"port taken", jetstream.OpenConfig{Server: jetstream.ServerConfig{DataDir: t.TempDir(), Port: port}}, jetstream.ErrPortInUse},
		{"data dir not a directory", jetstream.OpenConfig{Server: jetstream.ServerConfig{DataDir: filepath.Join(file, "data"), Port: -1}}, jetstream.ErrDataDir},
		{"replicas on one node", jetstream.OpenConfig{Server: jetstream.ServerConfig{DataDir: t.TempDir(), Port: -1}, Bus: jetstream.Config{Replicas: 3}}, jetstream.ErrBadServerConfig},
		{"topic replicas on one node", jetstream.OpenConfig{Server: jetstream.ServerConfig{DataDir: t.TempDir(), Port: -1}, Bus: jetstream.Config{Topics: []jetstream.TopicConfig{{Pattern: "r.t", Replicas: 3}}}}, jetstream.ErrBadServerConfig},
		{"memory with sync always", jetstream.OpenConfig{Server: jetstream.ServerConfig{Memory: true, Sync: jetstream.SyncAlways, Port: -1}}, jetstream.ErrBadServerConfig},
	} {
		start := time.Now()
		b, err := jetstream.Open(t.Context(), tc.oc)
		if b != nil {
			b.Close()
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s: refused after %v", tc.name, d)
		}
	}
}
