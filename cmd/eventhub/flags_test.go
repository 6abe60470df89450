package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// binary builds the eventhub command once per test run.
func binary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "eventhub-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "eventhub")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = errors.New(string(out))
		}
	})
	if binErr != nil {
		t.Fatalf("build: %v", binErr)
	}
	return binPath
}

func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"serve", "-help"}, {"export", "-h"}, {"token", "-h"}} {
		cmd := exec.Command(binary(t), args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("eventhub %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if !strings.Contains(string(out), "-") || strings.Contains(string(out), "help requested") {
			t.Errorf("eventhub %s printed %q", strings.Join(args, " "), out)
		}
	}
}

// TestHelpListsSubcommands: eventhub -h names every subcommand, with a
// line each, before the flags of serve.
func TestHelpListsSubcommands(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"serve", "-h"}, {"help"}} {
		out, err := exec.Command(binary(t), args...).CombinedOutput()
		if err != nil {
			t.Fatalf("eventhub %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		for _, cmd := range []string{"serve", "config", "export", "topics create", "token", "healthcheck", "bench", "version"} {
			if !strings.Contains(string(out), "\n  eventhub "+cmd) && !strings.Contains(string(out), "\n  eventhub ["+cmd+"]") {
				t.Errorf("eventhub %s does not list %q:\n%s", strings.Join(args, " "), cmd, out)
			}
		}
	}
}

func TestMalformedEnvironmentIsRefused(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"WS_PORT", "80a"}, {"EVENTHUB_MEMORY", "yes please"}, {"JWT_LEEWAY", "5"},
		{"EVENTHUB_SYNC", "sometimes"}, {"LOG_LEVEL", "loud"}, {"LOG_FORMAT", "xml"},
	} {
		_, err := parseServe(nil, env(map[string]string{tc.name: tc.value}), &syncBuffer{})
		if err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s=%q: %v, want an error naming the variable", tc.name, tc.value, err)
		}
	}
	// The binary refuses it too, with a non-zero exit.
	cmd := exec.Command(binary(t), "-memory")
	cmd.Env = append(os.Environ(), "WS_PORT=80a")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "WS_PORT") {
		t.Fatalf("WS_PORT=80a: %v\n%s", err, out)
	}
}

func TestHealthcheckFailsWhenNothingIsReady(t *testing.T) {
	err := run(t.Context(), []string{"healthcheck", "-ops-port", "1", "-timeout", "500ms"}, env(nil), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("healthcheck with no hub: %v", err)
	}
}
