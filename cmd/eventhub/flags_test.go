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

// Help output lands in CI logs and on shared screens: it says that a secret
// is set, never what it is, whether the secret came from the environment or
// from the configuration file.
func TestHelpNeverPrintsSecrets(t *testing.T) {
	// Each variable's value, and the part of it that must never be shown.
	secrets := map[string][2]string{
		"WS_TOKEN":          {"s3cr3t-ws-token-0123456789", "s3cr3t-ws-token"},
		"JWT_SECRET":        {"s3cr3t-jwt-0123456789-0123456789-0123456789", "s3cr3t-jwt"},
		"NATS_PASSWORD":     {"nats-password-secret", "nats-password-secret"},
		"NATS_TOKEN":        {"nats-token-secret", "nats-token-secret"},
		"NATS_CALLOUT_SEED": {"SACALLOUTSEEDSECRET", "SACALLOUTSEEDSECRET"},
		"EVENTHUB_TOKEN":    {"bench-token-secret", "bench-token-secret"},
		"NATS_URL":          {"nats://user:nats-url-password@nats:4222", "nats-url-password"},
		"EVENTHUB_NATS_URL": {"nats://user:bench-url-password@nats:4222", "bench-url-password"},
		"OUTBOX_DB_URL":     {"postgres://user:outbox-db-password@db/outbox", "outbox-db-password"},
	}
	environment := map[string]string{}
	for name, s := range secrets {
		environment[name] = s[0]
	}
	for _, args := range [][]string{
		{"-h"}, {"serve", "-h"}, {"config", "-h"}, {"serve", "-no-such-flag"},
		{"export", "-h"}, {"topics", "create", "-h"}, {"token", "-h"}, {"bench", "-h"}, {"healthcheck", "-h"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out syncBuffer
			if err := run(t.Context(), args, env(environment), &out, &out); err == nil {
				t.Fatalf("eventhub %v succeeded", args)
			}
			for name, s := range secrets {
				if strings.Contains(out.String(), s[1]) {
					t.Errorf("the help shows $%s's secret:\n%s", name, out.String())
				}
			}
			for _, flag := range []string{"-ws-token", "-jwt-secret", "-secret", "-nats-password", "-token"} {
				if strings.Contains(out.String(), "\n  "+flag+" string") && !strings.Contains(out.String(), ") (set from $") {
					t.Errorf("the help does not say that %s is set:\n%s", flag, out.String())
				}
			}
		})
	}

	config := filepath.Join(t.TempDir(), "eventhub.yaml")
	if err := os.WriteFile(config, []byte(`
auth: {token: file-token-secret-0123456789, jwt: {secret: file-jwt-secret-0123456789-0123456789}}
nats: {url: "nats://u:file-url-password@nats:4222", password: file-nats-password, token: file-nats-token, calloutSeed: SAFILESEED}
outbox: {db: "postgres://u:file-db-password@db/x"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	if err := run(t.Context(), []string{"-config", config, "-h"}, env(nil), &out, &out); err == nil {
		t.Fatal("eventhub -config -h succeeded")
	}
	for _, s := range []string{"file-token-secret", "file-jwt-secret", "file-url-password", "file-nats-password", "file-nats-token", "SAFILESEED", "file-db-password"} {
		if strings.Contains(out.String(), s) {
			t.Errorf("the help shows the configuration file's secret %q:\n%s", s, out.String())
		}
	}
	if n := strings.Count(out.String(), "(set by the configuration file)"); n != 5 {
		t.Errorf("the help says %d times that the file sets a secret, want 5:\n%s", n, out.String())
	}
}
