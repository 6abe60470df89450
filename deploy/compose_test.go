// Package deploy_test runs the compose files of the repository on a Docker
// engine, as a user does: the images are built from the Dockerfile, the
// services come up with their own health checks, and every check goes
// through the ports the files publish on this machine.
package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"go.yaml.in/yaml/v3"

	"github.com/eventhub/eventhub/auth"
	"github.com/eventhub/eventhub/client"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/internal/testutil"
)

const (
	// devToken is the files' default WS_TOKEN.
	devToken = "change-me-dev-token"
	// jwtSecret is the JWT_SECRET the files are run with.
	jwtSecret = "compose-jwt-secret-0123456789abcdef"
)

// requireEngine is the variable .ci/run sets where a Docker engine answers:
// then a test that finds no engine fails instead of skipping.
const requireEngine = "EVENTHUB_REQUIRE_DOCKER"

// composeTool is the Compose command of this machine: the docker CLI plugin
// (`docker compose`) or the standalone `docker-compose`.
func composeTool(t *testing.T) []string {
	t.Helper()
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		msg := fmt.Sprintf("no Docker engine answers (docker info: %v: %s)", err, strings.TrimSpace(string(out)))
		if os.Getenv(requireEngine) == "1" {
			t.Fatalf("%s, yet %s=1 says one runs here", msg, requireEngine)
		}
		t.Skip(msg + "; TestDockerComposeWithoutDocker and TestClusterComposeWithoutDocker in cmd/eventhub run the files' contents without one")
	}
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}
	}
	if exec.Command("docker-compose", "version").Run() == nil {
		return []string{"docker-compose"}
	}
	t.Fatal("a Docker engine answers, but neither `docker compose` nor `docker-compose` is installed")
	return nil
}

// project is one compose file brought up under a project name of its own.
type project struct {
	t    *testing.T
	tool []string
	name string
	file string
}

type composeServices struct {
	Services map[string]struct {
		Image string `yaml:"image"`
		Build any    `yaml:"build"`
	} `yaml:"services"`
}

// runnable are the services of file whose images exist here: those built
// from this repository and the NATS nodes. Prometheus, Grafana and the
// NATS exporters come from registries this engine may not reach; their
// configuration is checked by TestClusterComposeWithoutDocker.
func runnable(t *testing.T, file string) (services []string, natsImage string) {
	t.Helper()
	b, err := os.ReadFile("../" + file)
	if err != nil {
		t.Fatal(err)
	}
	var cs composeServices
	if err := yaml.Unmarshal(b, &cs); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for name, s := range cs.Services {
		switch {
		case s.Build != nil:
			services = append(services, name)
		case strings.HasPrefix(s.Image, "nats:"):
			services = append(services, name)
			natsImage = s.Image
		}
	}
	slices.Sort(services)
	return services, natsImage
}

// compose runs the Compose tool on the project and returns its output.
func (p *project) compose(args ...string) (string, error) {
	all := append(slices.Clone(p.tool[1:]), "-p", p.name, "-f", "../"+p.file)
	cmd := exec.Command(p.tool[0], append(all, args...)...)
	cmd.Env = append(os.Environ(), "JWT_SECRET="+jwtSecret, "WS_TOKEN="+devToken)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (p *project) must(args ...string) string {
	p.t.Helper()
	out, err := p.compose(args...)
	if err != nil {
		p.t.Fatalf("compose %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// up builds what the file builds and starts services, then waits for each
// to be healthy, as `up --wait` does. Cleanup takes the project down with
// its volumes.
func up(t *testing.T, tool []string, file string, services []string) *project {
	t.Helper()
	p := &project{t: t, tool: tool, name: fmt.Sprintf("%s%d", projectPrefix, os.Getpid()), file: file}
	p.downStale()
	start := time.Now()
	p.must("build")
	t.Logf("%s: compose build took %v", file, time.Since(start).Round(time.Second))
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := p.compose("logs", "--no-color", "--tail", "80")
			t.Logf("%s logs:\n%s", file, out)
		}
		if out, err := p.compose("down", "-v", "--remove-orphans", "-t", "5"); err != nil {
			t.Errorf("compose down: %v\n%s", err, out)
		}
	})
	start = time.Now()
	p.must(append([]string{"up", "-d", "--no-build"}, services...)...)
	for _, s := range services {
		p.waitHealthy(s, 3*time.Minute)
	}
	t.Logf("%s: up and healthy in %v", file, time.Since(start).Round(time.Second))
	return p
}

// projectPrefix starts the name of every project these tests bring up.
const projectPrefix = "eventhub-test-"

// downStale takes down what an earlier run left up (a run killed before
// its cleanup): it would hold the ports the files publish.
func (p *project) downStale() {
	out, err := exec.Command("docker", "ps", "-a", "--format", `{{.Label "com.docker.compose.project"}}`).Output()
	if err != nil {
		p.t.Fatalf("docker ps: %v", err)
	}
	seen := map[string]bool{}
	for _, name := range strings.Fields(string(out)) {
		if !strings.HasPrefix(name, projectPrefix) || seen[name] {
			continue
		}
		seen[name] = true
		stale := &project{t: p.t, tool: p.tool, name: name, file: p.file}
		if out, err := stale.compose("down", "-v", "--remove-orphans", "-t", "1"); err != nil {
			p.t.Fatalf("taking down %s, left by an earlier run: %v\n%s", name, err, out)
		}
		p.t.Logf("took down %s, left by an earlier run", name)
	}
}

// container is the id of service's container.
func (p *project) container(service string) string {
	p.t.Helper()
	id := strings.TrimSpace(p.must("ps", "-q", service))
	if id == "" {
		p.t.Fatalf("%s has no container", service)
	}
	return id
}

func (p *project) waitHealthy(service string, timeout time.Duration) {
	p.t.Helper()
	id := p.container(service)
	testutil.CheckFor(p.t, timeout, func() error {
		out, err := exec.Command("docker", "inspect", "--format", "{{.State.Status}} {{.State.Health.Status}}", id).CombinedOutput()
		if err != nil {
			return fmt.Errorf("inspect %s: %v %s", service, err, out)
		}
		if s := strings.TrimSpace(string(out)); s != "running healthy" {
			return fmt.Errorf("%s is %s", service, s)
		}
		return nil
	})
}

func (p *project) docker(args ...string) {
	p.t.Helper()
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		p.t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// hubPorts are the ports a hub service publishes on this machine.
type hubPorts struct{ ws, http, ops string }

var (
	hubA = hubPorts{"ws://127.0.0.1:8090", "http://127.0.0.1:8081", "http://127.0.0.1:8082"}
	hubB = hubPorts{"ws://127.0.0.1:9090", "http://127.0.0.1:9081", "http://127.0.0.1:9082"}
)

const natsURL = "nats://127.0.0.1:4222"

// TestComposeOnDocker brings up docker-compose.yml and
// deploy/compose.cluster.yml in turn (they publish the same ports), checks
// each as a user would, and runs the cluster's faults.
func TestComposeOnDocker(t *testing.T) {
	tool := composeTool(t)
	_, natsImage := runnable(t, "docker-compose.yml")
	standInImages(t, natsImage)

	t.Run("single", func(t *testing.T) {
		services, _ := runnable(t, "docker-compose.yml")
		up(t, tool, "docker-compose.yml", services)
		userChecks(t, hubA, hubA, "compose.single")
	})
	t.Run("cluster", func(t *testing.T) {
		services, img := runnable(t, "deploy/compose.cluster.yml")
		if img != natsImage {
			t.Fatalf("the cluster file runs %s, the single-node file %s", img, natsImage)
		}
		p := up(t, tool, "deploy/compose.cluster.yml", services)
		userChecks(t, hubA, hubB, "compose.cluster")
		if r := streamReplicas(t, "compose.cluster"); r != 3 {
			t.Fatalf("the topic's stream has %d replicas, want 3", r)
		}
		clusterFaults(t, p)
	})
}

// userChecks does what a user of the files does first, through the
// published ports: publish over HTTP (to pub) and WebSocket (to sub),
// consume in a group, follow live and over SSE through sub, read /metrics
// and the dashboard page, and use a native NATS client with a hub token.
func userChecks(t *testing.T, pub, sub hubPorts, topic string) {
	ctx := t.Context()
	c, err := client.Dial(ctx, sub.ws, client.Config{Token: devToken})
	if err != nil {
		t.Fatalf("dial %s: %v", sub.ws, err)
	}
	defer c.Close()

	// Live, over WebSocket and SSE, from before the publishes.
	live := make(chan string, 16)
	f, err := c.Follow(ctx, topic, 0, func(e *facade.EventRecord) { live <- e.ID })
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	defer f.Stop(context.Background())
	sse := followSSE(t, sub, topic)

	idHTTP := httpPublish(t, pub, topic, "http-1")
	rec, err := c.Publish(ctx, topic, json.RawMessage(`{"via":"ws"}`), facade.PublishOptions{})
	if err != nil {
		t.Fatalf("publish over WebSocket: %v", err)
	}
	want := []string{idHTTP, rec.ID}

	got := make(chan string, 16)
	s, err := c.Subscribe(ctx, topic, "compose-check", func(_ context.Context, d facade.Delivery) error {
		got <- d.Event().ID
		return nil
	}, facade.SubscribeOptions{From: facade.FromEarliest, MaxInFlight: 1}) // one at a time: in stream order
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	defer s.Stop(context.Background())
	for name, ch := range map[string]chan string{"group": got, "live": live, "sse": sse} {
		for _, id := range want {
			select {
			case g := <-ch:
				if g != id {
					t.Fatalf("%s: got %s, want %s", name, g, id)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%s: event %s did not come", name, id)
			}
		}
	}

	// /metrics with the operator's token, and the dashboard page.
	body := httpGet(t, sub.ops+"/metrics", devToken)
	if !strings.Contains(body, "ws_connections") {
		t.Fatalf("/metrics has no ws_connections:\n%.500s", body)
	}
	if page := httpGet(t, sub.http+"/", ""); !strings.Contains(strings.ToLower(page), "<html") {
		t.Fatalf("the dashboard page is no HTML page:\n%.300s", page)
	}
	nativeChecks(t, topic)
}

// httpPublish publishes one event with the caller's id and returns its id.
func httpPublish(t *testing.T, h hubPorts, topic, id string) string {
	t.Helper()
	var got string
	testutil.CheckFor(t, 30*time.Second, func() error {
		var err error
		got, err = tryPublish(t.Context(), h, topic, id)
		return err
	})
	return got
}

func tryPublish(ctx context.Context, h hubPorts, topic, id string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.http+"/publish/"+topic, strings.NewReader(`{"via":"http"}`))
	req.Header.Set("Authorization", "Bearer "+devToken)
	req.Header.Set("Eventhub-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body struct {
		ID string `json:"id"`
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("publish: %s: %s", resp.Status, b)
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return "", err
	}
	return body.ID, nil
}

func httpGet(t *testing.T, url, token string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b)
}

// followSSE follows topic over SSE and sends the id of each event on the
// channel it returns, once the stream says it is ready.
func followSSE(t *testing.T, h hubPorts, topic string) chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.http+"/sse/"+topic, nil)
	req.Header.Set("Authorization", "Bearer "+devToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("GET /sse/%s: %s", topic, resp.Status)
	}
	ids := make(chan string, 16)
	ready := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
				if event == "ready" {
					close(ready)
				}
			case strings.HasPrefix(line, "data: ") && event == "event":
				var e facade.EventRecord
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e) == nil {
					ids <- e.ID
				}
			}
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("the SSE stream did not say ready")
	}
	return ids
}

// nativeChecks connects to NATS on the published port as an existing NATS
// client would, with a hub token (the files leave nativeScopedClients off,
// so a scoped token is refused).
func nativeChecks(t *testing.T, topic string) {
	t.Helper()
	scoped, err := auth.MintHS256([]byte(jwtSecret), auth.MintClaims{Subject: "compose-native",
		Scopes: []string{"publish:" + topic, "subscribe:" + topic}, TTL: time.Minute}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	natstest.CheckCalloutAuth(t, natsURL, devToken, scoped, topic)
}

// stream is the JetStream stream of topic, read through NATS on the
// published port with the static token.
func stream(t *testing.T, topic string) (*njs.StreamInfo, error) {
	nc, err := nats.Connect(natsURL, nats.Token(devToken), nats.Timeout(5*time.Second), nats.NoReconnect())
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := njs.New(nc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	name, err := js.StreamNameBySubject(ctx, topic)
	if err != nil {
		return nil, err
	}
	s, err := js.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.Info(ctx)
}

func streamReplicas(t *testing.T, topic string) int {
	t.Helper()
	info, err := stream(t, topic)
	if err != nil {
		t.Fatal(err)
	}
	return info.Config.Replicas
}

var errNoLeader = errors.New("the stream has no leader")
