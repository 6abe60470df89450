package docscheck

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// shellBlock is one ```sh block of a page.
type shellBlock struct {
	doc  string // README.md, docs/http-api.md, …
	line int    // of its opening fence
	text string
}

func (b *shellBlock) String() string { return fmt.Sprintf("%s:%d", b.doc, b.line) }

var shellFence = regexp.MustCompile("(?m)^```sh\n")

// shellBlocks returns the ```sh blocks of README.md and docs/*.md.
func shellBlocks(t *testing.T, root string) []*shellBlock {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*shellBlock
	for _, path := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		s := string(b)
		for _, loc := range shellFence.FindAllStringIndex(s, -1) {
			end := strings.Index(s[loc[1]:], "```")
			if end < 0 {
				t.Fatalf("%s: unterminated block", rel)
			}
			out = append(out, &shellBlock{doc: rel, line: strings.Count(s[:loc[0]], "\n") + 1, text: s[loc[1] : loc[1]+end]})
		}
	}
	return out
}

// hubLine is a command line that runs the hub: eventhub with flags only
// (no subcommand), after variable assignments.
var hubLine = regexp.MustCompile(`^((?:[A-Z_]+=(?:\$\([^)]*\)|\S+)\s+)*)(?:eventhub|go run \./cmd/eventhub)(\s+-[^#]*)?\s*(#.*)?$`)

var transcriptLine = regexp.MustCompile(`(?m)^\$ `)

// docsEnv is what the blocks run with: the eventhub binary that the
// README's go install builds, on PATH, and a hub's ports, free ones
// standing in for the documented defaults.
type docsEnv struct {
	root, bin string
	ports     map[string]int // by the documented default: "8081", …
	realCurl  string
}

// script turns blocks into one bash script, run in a fresh directory: the
// documented ports become the free ones, a line that runs the hub starts
// it in the background and waits until it is ready, go commands run in the
// repository, and the lines skip drops (with the reason given there).
func (e *docsEnv) script(blocks []string, skip map[string]string) string {
	var b strings.Builder
	b.WriteString(`set -euo pipefail
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
wait_ready() {
  for _ in $(seq 1 600); do
    "$REAL_CURL" -sf -o /dev/null "http://127.0.0.1:$OPS_PORT/readyz" && return 0
    kill -0 "$HUB" 2>/dev/null || break
    sleep 0.1
  done
  echo "the hub did not get ready:" >&2; cat hub.log >&2; return 1
}
`)
	// One pass over the text: a free port that begins like a documented
	// one (42221 and 4222) must not be replaced again, into a port number
	// curl refuses (exit 3, malformed URL).
	var pairs []string
	for _, from := range []string{"8081", "8082", "8090", "4222"} {
		to := strconv.Itoa(e.ports[from])
		pairs = append(pairs, "127.0.0.1:"+from, "127.0.0.1:"+to, "localhost:"+from, "localhost:"+to)
	}
	ports := strings.NewReplacer(pairs...)
	for _, block := range blocks {
		text := ports.Replace(strings.ReplaceAll(block, "\\\n", " "))
		// A transcript ("$ command", then its output) runs its commands.
		transcript := transcriptLine.MatchString(text)
	lines:
		for _, line := range strings.Split(text, "\n") {
			if transcript {
				var ok bool
				if line, ok = strings.CutPrefix(line, "$ "); !ok {
					continue
				}
			}
			for prefix := range skip {
				if strings.HasPrefix(line, prefix) {
					continue lines
				}
			}
			switch {
			case hubLine.MatchString(line):
				m := hubLine.FindStringSubmatch(line)
				fmt.Fprintf(&b, "%seventhub%s >hub.log 2>&1 & HUB=$!\nwait_ready\nexport NATS_URL=nats://127.0.0.1:%d\n", m[1], m[2], e.ports["4222"])
			case strings.HasPrefix(line, "go "):
				cmd, _, _ := strings.Cut(line, " #")
				fmt.Fprintf(&b, "(cd %q && %s)\n", e.root, cmd)
			default:
				b.WriteString(line + "\n")
			}
		}
	}
	return b.String()
}

// run runs script in a new directory, for at most limit, and returns its
// output and the HTTP statuses of its curl calls ("200 http://…").
func (e *docsEnv) run(t *testing.T, limit time.Duration, script string, extraEnv ...string) (stdout, stderr string, statuses []string, err error) {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(),
		"PATH="+e.bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GOBIN="+e.bin,
		"REAL_CURL="+e.realCurl,
		"CURL_STATUS_LOG="+filepath.Join(cmd.Dir, "curl.status"),
		"WS_PORT="+strconv.Itoa(e.ports["8090"]),
		"HTTP_PORT="+strconv.Itoa(e.ports["8081"]),
		"OPS_PORT="+strconv.Itoa(e.ports["8082"]),
		"EVENTHUB_NATS_PORT="+strconv.Itoa(e.ports["4222"]),
		// eventhub bench's addresses, which its documented command leaves
		// to their defaults.
		"EVENTHUB_WS_URL=ws://127.0.0.1:"+strconv.Itoa(e.ports["8090"]),
		"EVENTHUB_HTTP_URL=http://127.0.0.1:"+strconv.Itoa(e.ports["8081"]),
		"EVENTHUB_OPS_URL=http://127.0.0.1:"+strconv.Itoa(e.ports["8082"]),
		"EVENTHUB_NATS_URL=nats://127.0.0.1:"+strconv.Itoa(e.ports["4222"]),
	)
	cmd.Env = append(cmd.Env, extraEnv...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	// Its own process group, so that what it leaves running (a hub it
	// started) ends with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(limit):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = fmt.Errorf("timed out: %w", <-done)
	}
	log, _ := os.ReadFile(filepath.Join(cmd.Dir, "curl.status"))
	statuses = statusLine.FindAllString(string(log), -1)
	if err != nil && len(log) > 0 {
		// curl's own messages go to that log with the statuses.
		errOut.WriteString("\ncurl (messages and statuses):\n")
		errOut.Write(log)
	}
	return out.String(), errOut.String(), statuses, err
}

var statusLine = regexp.MustCompile(`(?m)^\d{3} \S+$`)

// curlShim records the status of every curl call of the blocks, and bounds
// their time (CURL_MAX_TIME, default 20 s).
const curlShim = `#!/bin/sh
exec "$REAL_CURL" --max-time "${CURL_MAX_TIME:-20}" -w '%{stderr}%{http_code} %{url_effective}\n' "$@" 2>>"$CURL_STATUS_LOG"
`

// freePorts returns n distinct ports free just now: each is held until all
// are chosen, so the system cannot hand out one of them twice.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// TestDocsCommands runs the shell commands of README.md and docs/ as they
// are written, with the eventhub binary the README's `go install` builds on
// PATH, in scenarios that put them in the order a reader would run them
// (a block that needs a running hub after the one that starts it). Every
// block is either run or skipped here with the reason; a new block fails
// the test until it is placed.
func TestDocsCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	realCurl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is not installed (Debian: apt-get install curl)")
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Fatal("openssl is not installed (Debian: apt-get install openssl)")
	}
	e := &docsEnv{root: root, bin: t.TempDir(), realCurl: realCurl, ports: map[string]int{}}
	if err := os.WriteFile(filepath.Join(e.bin, "curl"), []byte(curlShim), 0o755); err != nil {
		t.Fatal(err)
	}
	blocks := shellBlocks(t, root)
	placed := map[*shellBlock]string{}
	// block returns the text of the block of doc that contains s.
	block := func(doc, s string) string {
		t.Helper()
		for _, b := range blocks {
			if b.doc == doc && strings.Contains(b.text, s) {
				placed[b] = "run"
				return b.text
			}
		}
		t.Fatalf("%s has no ```sh block with %q", doc, s)
		return ""
	}
	skipBlock := func(doc, s, why string) {
		block(doc, s)
		for b := range placed {
			if b.doc == doc && strings.Contains(b.text, s) {
				placed[b] = why
			}
		}
	}
	skipBlock("docs/configuration.md", "docker compose up", "compose blocks: deploy/compose_test.go brings both files up on a Docker engine, cmd/eventhub's compose tests run them without one")
	skipBlock("docs/configuration.md", "eventhub token -sub alice", "starts the compose file, as the block above; eventhub token runs in the auth quick start")
	skipBlock("docs/nats.md", "nats pub heartbeat.received", "needs the nats CLI")
	skipBlock("docs/keys.md", "curl -X DELETE", "hub's TestKeyDeleteDocCommands runs it against a hub's gateway and HTTP ports")
	skipBlock("docs/keys.md", "key_prefix=", "hub's TestKeyWatchDocCommand runs it against a hub's gateway port")
	skipBlock("docs/keys.md", "nats pub -J", "needs the nats CLI")
	skipBlock("docs/keys.md", "nats stream get", "needs the nats CLI")
	skipBlock("docs/production.md", "./livebench/", "the live benchmark takes about half an hour; e2e/livebench's TestLiveBenchShort runs its cases small")
	// ./scripts/test runs the suite this test is part of.
	skipLines := map[string]string{"./scripts/test": "the whole suite"}

	fresh := func() {
		documented := []string{"8081", "8082", "8090", "4222"}
		for i, port := range freePorts(t, len(documented)) {
			e.ports[documented[i]] = port
		}
	}
	// runFresh runs the blocks as one script on ports free just now.
	// Another process can still take one before the hub binds it; then the
	// scenario runs again on new ports.
	runFresh := func(t *testing.T, limit time.Duration, blocks []string, extraEnv ...string) (stdout, stderr string, statuses []string, err error) {
		t.Helper()
		for try := 1; ; try++ {
			fresh()
			stdout, stderr, statuses, err = e.run(t, limit, e.script(blocks, skipLines), extraEnv...)
			if err == nil || try == 3 || !strings.Contains(stderr, "address already in use") {
				return stdout, stderr, statuses, err
			}
			t.Logf("a port was taken before the hub bound it; running again on new ports:\n%s", stderr)
		}
	}
	check := func(t *testing.T, what string, ok bool, stdout, stderr string) {
		t.Helper()
		if !ok {
			t.Errorf("%s\nstdout:\n%s\nstderr:\n%s", what, stdout, stderr)
		}
	}
	statusesOK := func(t *testing.T, statuses []string, allowed ...int) {
		t.Helper()
		for _, s := range statuses {
			code, _ := strconv.Atoi(strings.Fields(s)[0])
			ok := code >= 200 && code < 300
			for _, a := range allowed {
				ok = ok || code == a
			}
			if !ok {
				t.Errorf("curl answered %s", s)
			}
		}
	}

	// The blocks of each scenario, in the order they run (taken before any
	// runs, so that a run of some scenarios still checks every placement).
	quickStart := []string{
		block("README.md", "go install ./cmd/eventhub"),
		block("README.md", "go run ./cmd/eventhub"), // runs the binary just installed: the same source
		block("README.md", "publish/heartbeat.received"),
	}
	authShells := []string{
		block("docs/auth.md", "openssl rand -hex 32 > jwt.secret"),
		block("docs/auth.md", "TOKEN=$(JWT_SECRET=$(cat jwt.secret) eventhub token"),
		strings.TrimRight(block("docs/protocol.md", "/sse/process.state"), "\n") + " || [ $? -eq 28 ]\n", // it streams until curl's time is up
		block("docs/protocol.md", "8090/publish/heartbeat.received"),
	}
	staticToken := []string{
		"export WS_TOKEN=docs-static-token-0123456789 TOKEN=docs-static-token-0123456789\neventhub\n",
		block("docs/nats.md", "eventhub topics create -nats-token $WS_TOKEN"),
		block("docs/production.md", "eventhub bench -transport ws"),
	}
	exports := []string{
		"eventhub\n" +
			"curl -sf -X POST -H 'Eventhub-Header-correlationId: req-7f3a' localhost:8081/publish/orders.created -d '{\"n\":1}'\n",
		block("docs/http-api.md", "-out orders.ndjson"),
		block("docs/http-api.md", "$ eventhub export -topic orders.created -correlation-id"),
	}
	admin := block("docs/http-api.md", "T=$(eventhub token -scopes admin)")

	// The quick start builds the binary the other scenarios run.
	ok := t.Run("quick start", func(t *testing.T) {
		// The first build of the binary, without a warm build cache,
		// takes minutes.
		out, errOut, statuses, err := runFresh(t, 15*time.Minute, quickStart)
		if err != nil {
			t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
		}
		check(t, "the publish answered no id", strings.Contains(out, `"id"`), out, errOut)
		statusesOK(t, statuses)
		if _, err := os.Stat(filepath.Join(e.bin, "eventhub")); err != nil {
			t.Fatalf("go install ./cmd/eventhub did not put eventhub in GOBIN: %v", err)
		}
	})
	if !ok {
		t.Fatal("no eventhub binary: the other scenarios cannot run")
	}

	t.Run("auth in two shells", func(t *testing.T) {
		out, errOut, statuses, err := runFresh(t, 3*time.Minute, authShells, "CURL_MAX_TIME=3")
		if err != nil {
			t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
		}
		check(t, "no ready event on the event stream", strings.Contains(out, "event: ready"), out, errOut)
		check(t, "the publish with the minted token answered no id", strings.Contains(out, `"id"`), out, errOut)
		statusesOK(t, statuses)
	})

	t.Run("static token", func(t *testing.T) {
		out, errOut, _, err := runFresh(t, 3*time.Minute, staticToken)
		if err != nil {
			t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
		}
		check(t, "topics create did not print the streams", strings.Contains(out, "orders.new\tEH_orders_new_") &&
			strings.Contains(out, "orders.paid\tEH_orders_paid_"), out, errOut)
		check(t, "bench printed no summary", strings.Contains(out, "published"), out, errOut)
		check(t, "bench did not delete its topic", strings.Contains(errOut, "deleted the topic bench.load"), out, errOut)
	})

	t.Run("export", func(t *testing.T) {
		out, errOut, _, err := runFresh(t, 3*time.Minute, exports)
		if err != nil {
			t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
		}
		summary := regexp.MustCompile(`exported \d+ of \d+ events read \(\d+ bytes\)`)
		check(t, "export printed no summary like the documented one", summary.MatchString(errOut), out, errOut)
	})

	t.Run("admin API", func(t *testing.T) {
		prelude := "export JWT_SECRET=$(openssl rand -hex 32)\neventhub\n"
		out, errOut, statuses, err := runFresh(t, 3*time.Minute, []string{prelude, admin})
		if err != nil {
			t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
		}
		// Groups, dead letters, events and sessions the block names by
		// example may not exist here: 404 is their answer. Anything else
		// (401, 403, 400, 405, 5xx) is the block's fault.
		statusesOK(t, statuses, 404)
		if want := strings.Count(admin, "curl "); len(statuses) != want {
			t.Errorf("%d curl calls answered, want %d:\n%s", len(statuses), want, strings.Join(statuses, "\n"))
		}
	})

	for _, b := range blocks {
		switch why, ok := placed[b]; {
		case !ok:
			t.Errorf("%s: a ```sh block this test does not run: place it in a scenario, or skip it saying why:\n%s", b, b.text)
		case why != "run":
			t.Logf("%s not run: %s", b, why)
		}
	}
}
