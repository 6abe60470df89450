package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventhub/eventhub/acl"
	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
	"github.com/eventhub/eventhub/internal/testutil"
)

// syncBuffer is output the program and the test share.
type syncBuffer = testutil.Buffer

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseServe(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	configFile := write("eventhub.yaml", `
nats: {dataDir: /from-file}
server: {wsPort: 9000}
gateway: {maxInflightPerSub: 7}
outbox: {batchSize: 50}
ops: {maxConcurrentReplays: 2}
metrics: {maxTopics: 10}
projector: {states: proc.state}
`)
	badKeyFile := write("bad-key.yaml", "gateway:\n  maxInflight: 7\n")
	badLimitFile := write("bad-limit.yaml", "gateway:\n  pingInterval: 2m\n  idleTimeout: 1m\n")
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(t *testing.T, c hub.Config)
		wantErr error
		errText string
	}{
		{name: "defaults", check: func(t *testing.T, c hub.Config) {
			if c.NATS.URL != "" || c.NATS.Host != "127.0.0.1" || c.NATS.Port != 4222 || c.NATS.DataDir != "data" || c.NATS.Sync != "default" || c.Auth.NativeScoped {
				t.Fatalf("defaults %+v", c)
			}
		}},
		{name: "environment", env: map[string]string{"NATS_URL": "nats://n:4222", "EVENTHUB_SYNC": "always", "EVENTHUB_MEMORY": "true"},
			check: func(t *testing.T, c hub.Config) {
				if c.NATS.URL != "nats://n:4222" || c.NATS.Sync != "always" || !c.NATS.Memory {
					t.Fatalf("env not applied: %+v", c)
				}
			}},
		{name: "flag beats environment", args: []string{"-data-dir", "/x"}, env: map[string]string{"EVENTHUB_DATA_DIR": "/y"},
			check: func(t *testing.T, c hub.Config) {
				if c.NATS.DataDir != "/x" {
					t.Fatalf("data dir %q", c.NATS.DataDir)
				}
			}},
		{name: "native scoped clients", args: []string{"-native-scoped-clients"}, check: func(t *testing.T, c hub.Config) {
			if !c.Auth.NativeScoped {
				t.Fatal("-native-scoped-clients not applied")
			}
		}},
		{name: "native scoped clients from the environment", env: map[string]string{"EVENTHUB_NATIVE_SCOPED_CLIENTS": "true"}, check: func(t *testing.T, c hub.Config) {
			if !c.Auth.NativeScoped {
				t.Fatal("EVENTHUB_NATIVE_SCOPED_CLIENTS not applied")
			}
		}},
		{name: "jwt secret", args: []string{"-jwt-secret", "flag-jwt-secret-0123456789-0123456789"}, env: map[string]string{"JWT_SECRET": "env-jwt-secret-0123456789-0123456789"},
			check: func(t *testing.T, c hub.Config) {
				if string(c.Auth.JWT.Secret) != "flag-jwt-secret-0123456789-0123456789" {
					t.Fatalf("jwt secret %q", c.Auth.JWT.Secret)
				}
			}},
		{name: "jwt secret from the environment", env: map[string]string{"JWT_SECRET": "env-jwt-secret-0123456789-0123456789"},
			check: func(t *testing.T, c hub.Config) {
				if string(c.Auth.JWT.Secret) != "env-jwt-secret-0123456789-0123456789" {
					t.Fatalf("jwt secret %q", c.Auth.JWT.Secret)
				}
			}},
		{name: "nats port open beyond loopback", args: []string{"-nats-host", "0.0.0.0"}, wantErr: hub.ErrInsecureListen},
		{name: "bad sync", args: []string{"-sync", "sometimes"}, errText: "-sync, $EVENTHUB_SYNC"},
		{name: "bad log level", args: []string{"-log-level", "loud"}, errText: "-log-level, $LOG_LEVEL"},
		{name: "stray argument", args: []string{"extra"}, errText: "unexpected arguments"},
		{name: "missing config file", args: []string{"-config", "/nonexistent.yaml"}, errText: "read config"},
		{name: "config file", args: []string{"-config", configFile}, check: func(t *testing.T, c hub.Config) {
			if c.NATS.DataDir != "/from-file" || c.Server.WSPort != 9000 || c.Gateway.MaxInflightPerSub != 7 || c.Outbox.Drainer.BatchSize != 50 ||
				c.Ops.MaxConcurrentReplays != 2 || c.Metrics.MaxTopics != 10 || c.Projector.Projector.States != "proc.state" {
				t.Fatalf("file not applied: %+v", c)
			}
		}},
		{name: "config file from the environment", env: map[string]string{"EVENTHUB_CONFIG": configFile}, check: func(t *testing.T, c hub.Config) {
			if c.NATS.DataDir != "/from-file" {
				t.Fatalf("data dir %q", c.NATS.DataDir)
			}
		}},
		{name: "environment beats file", args: []string{"-config", configFile}, env: map[string]string{"WS_PORT": "9001"},
			check: func(t *testing.T, c hub.Config) {
				if c.Server.WSPort != 9001 || c.NATS.DataDir != "/from-file" {
					t.Fatalf("ws port %d, data dir %q", c.Server.WSPort, c.NATS.DataDir)
				}
			}},
		{name: "flag beats file and environment", args: []string{"-ws-port", "9002", "-config=" + configFile}, env: map[string]string{"WS_PORT": "9001"},
			check: func(t *testing.T, c hub.Config) {
				if c.Server.WSPort != 9002 {
					t.Fatalf("ws port %d", c.Server.WSPort)
				}
			}},
		{name: "unknown key in the file", args: []string{"-config", badKeyFile}, wantErr: hub.ErrUnknownKey, errText: "gateway.maxInflight"},
		{name: "invalid gateway limit in the file", args: []string{"-config", badLimitFile}, errText: "PingInterval"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			c, err := parseServe(tc.args, env(tc.env), &stderr)
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("err %v, want %v naming %q", err, tc.wantErr, tc.errText)
				}
			case tc.errText != "":
				if err == nil || !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("err %v, want one mentioning %q", err, tc.errText)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				tc.check(t, c)
			}
		})
	}
}

func TestRunStartsAndStopsGracefully(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "-memory", "-nats-port", "-1", "-log-format", "json"}, env(nil), &bytes.Buffer{}, &stderr)
	}()
	testutil.CheckFor(t, 15*time.Second, func() error {
		if !strings.Contains(stderr.String(), `"msg":"bus on embedded NATS"`) {
			return fmt.Errorf("hub did not start:\n%s", stderr.String())
		}
		return nil
	})
	if !strings.Contains(stderr.String(), `"durability":"none: memory storage, nothing survives a restart"`) {
		t.Fatalf("start-up log does not say which durability runs:\n%s", stderr.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no graceful exit")
	}
}

func TestUnknownCommand(t *testing.T) {
	err := run(t.Context(), []string{"frobnicate"}, env(nil), &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Fatalf("err %v", err)
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"version"}, env(nil), &out, &bytes.Buffer{}); err != nil || out.Len() == 0 {
		t.Fatalf("version: %v %q", err, out.String())
	}
}

func TestTokenMintsVerifiableJWT(t *testing.T) {
	secret := "0123456789abcdef0123456789abcdef"
	var out bytes.Buffer
	err := run(t.Context(), []string{"token", "-scopes", "publish:heartbeat.*,subscribe:process.**", "-ttl", "10m"},
		env(map[string]string{"JWT_SECRET": secret}), &out, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(t.Context(), auth.VerifierConfig{Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	claims, err := v.Verify(t.Context(), strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatal(err)
	}
	p, err := claims.CompiledPolicy()
	if err != nil {
		t.Fatal(err)
	}
	if !p.Allowed(acl.ActionPublish, "heartbeat.received", "") || p.Allowed(acl.ActionPublish, "process.state", "") ||
		!p.Allowed(acl.ActionSubscribe, "process.state", "ops") {
		t.Fatalf("minted token's rights are wrong: %+v", claims.Scopes)
	}
	for _, args := range [][]string{{"token", "-scopes", "publish:x"}, {"token", "-scopes", "bogus"}} {
		e := map[string]string{"JWT_SECRET": secret}
		if args[2] == "publish:x" {
			e = nil
		}
		if err := run(t.Context(), args, env(e), &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
			t.Fatalf("%v: no error", args)
		}
	}
}

// TestTokenMintsEveryDocumentedScope: every scope the README and docs/ name
// mints through `eventhub token`, alone and together, and the token
// carries it: the topic scopes, and the operator scopes admin and metrics.
func TestTokenMintsEveryDocumentedScope(t *testing.T) {
	secret := "0123456789abcdef0123456789abcdef"
	v, err := auth.NewVerifier(t.Context(), auth.VerifierConfig{Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for _, scopes := range []string{
		"admin", "metrics", "publish:heartbeat.*", "subscribe:process.**", "*:**",
		"publish:heartbeat.*,subscribe:process.**,admin,metrics",
	} {
		var out, stderr bytes.Buffer
		if err := run(t.Context(), []string{"token", "-scopes", scopes}, env(map[string]string{"JWT_SECRET": secret}), &out, &stderr); err != nil {
			t.Fatalf("token -scopes %s: %v (%s)", scopes, err, stderr.String())
		}
		claims, err := v.Verify(t.Context(), strings.TrimSpace(out.String()))
		if err != nil {
			t.Fatalf("token -scopes %s: %v", scopes, err)
		}
		if got := strings.Join(claims.Scopes, ","); got != scopes {
			t.Fatalf("token -scopes %s: the token carries %q", scopes, got)
		}
	}
	// A scope that is neither an operator scope nor a topic rule is
	// refused, and the error names it.
	err = run(t.Context(), []string{"token", "-scopes", "admin,root"}, env(map[string]string{"JWT_SECRET": secret}), &bytes.Buffer{}, &bytes.Buffer{})
	if !errors.Is(err, acl.ErrBadScope) || !strings.Contains(err.Error(), `"root"`) {
		t.Fatalf("token -scopes admin,root: %v, want bad_scope naming root", err)
	}
}

func TestExportFromStoppedHubDataDir(t *testing.T) {
	dir := t.TempDir()
	h, err := hub.Start(t.Context(), hub.Config{NATS: hub.NATSConfig{DataDir: dir, Port: -1}, Server: hub.ServerConfig{OpsPort: -1}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		o := facade.PublishOptions{Headers: map[string]string{"correlationId": fmt.Sprintf("c%d", i%2)}}
		if _, err := h.Bus.Publish(t.Context(), "exp.t", []byte(fmt.Sprintf(`{"n":%d}`, i)), o); err != nil {
			t.Fatal(err)
		}
	}
	// While the hub runs, its directory is its own: export is refused.
	var out, errOut bytes.Buffer
	err = run(t.Context(), []string{"export", "-data-dir", dir, "-topic", "exp.t"}, env(nil), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("export of a live hub's directory: %v", err)
	}
	if err := h.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := run(t.Context(), []string{"export", "-data-dir", dir, "-topic", "exp.t", "-from", "seq:2", "-to", "seq:4"}, env(nil), &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("exported %d lines:\n%s", len(lines), out.String())
	}
	for i, l := range lines {
		var e facade.EventRecord
		if err := json.Unmarshal([]byte(l), &e); err != nil || string(e.Payload) != fmt.Sprintf(`{"n":%d}`, i+1) || e.Topic != "exp.t" {
			t.Fatalf("line %d: %s (%v)", i, l, err)
		}
	}
	// The words a subscription's from takes work for both ends.
	out.Reset()
	if err := run(t.Context(), []string{"export", "-data-dir", dir, "-topic", "exp.t", "-from", "earliest", "-to", "latest"}, env(nil), &out, &errOut); err != nil {
		t.Fatalf("earliest..latest: %v\n%s", err, errOut.String())
	}
	if all := strings.Split(strings.TrimSpace(out.String()), "\n"); len(all) < 4 {
		t.Fatalf("earliest..latest exported %d lines", len(all))
	}
	// By correlation id: the events of one request, found by a scan.
	out.Reset()
	errOut.Reset()
	if err := run(t.Context(), []string{"export", "-data-dir", dir, "-topic", "exp.t", "-correlation-id", "c1"}, env(nil), &out, &errOut); err != nil {
		t.Fatalf("-correlation-id: %v\n%s", err, errOut.String())
	}
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(got) != 2 || !strings.Contains(got[0], `{"n":1}`) || !strings.Contains(got[1], `{"n":3}`) {
		t.Fatalf("-correlation-id c1 exported:\n%s", out.String())
	}
	if !strings.Contains(errOut.String(), "exported 2 of 5 events read") {
		t.Fatalf("summary: %s", errOut.String())
	}
}

// TestConfigPrintsTheEffectiveConfiguration: eventhub config prints what
// serve would run with (file, environment, flags, defaults), without the
// secrets, as a file that -config accepts.
func TestConfigPrintsTheEffectiveConfiguration(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.yaml")
	if err := os.WriteFile(in, []byte("gateway: {outboundQueue: 77}\nserver: {wsPort: 9000}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const token = "a-static-token-0123456789"
	var out bytes.Buffer
	err := run(t.Context(), []string{"config", "-config", in, "-ws-token", token}, env(map[string]string{"WS_PORT": "9005"}), &out, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"outboundQueue: 77", "wsPort: 9005", "token: REDACTED", "maxInflightPerSub: 100"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("eventhub config lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), token) {
		t.Fatalf("eventhub config prints the static token")
	}
	printed := filepath.Join(dir, "printed.yaml")
	if err := os.WriteFile(printed, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := hub.LoadFile(printed)
	if err != nil {
		t.Fatalf("the printed configuration does not load: %v", err)
	}
	if f.Gateway.OutboundQueue != 77 || f.Server.WSPort != 9005 {
		t.Fatalf("printed configuration read back as %+v", f)
	}
}
