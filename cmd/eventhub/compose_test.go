package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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

// The compose files are run by these tests without Docker: each NATS
// service is a nats-server process (built from go.mod's version) started
// with exactly the service's command, configuration file and environment,
// each hub runs in this process with exactly the service's environment,
// and the services' own health checks must pass before an event is
// published through one hub and consumed through another. Only what
// Docker would provide is replaced: volume paths become temporary
// directories, service host names become 127.0.0.1, and ports become free
// loopback ports. deploy/compose_test.go runs the real thing on a Docker
// engine.

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	dir      string
	// env is the environment compose interpolates from.
	env map[string]string
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Command     []string          `yaml:"command"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	Healthcheck struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	Restart string `yaml:"restart"`
}

// loadCompose reads a compose file, to be run as with env set (JWT_SECRET=…).
func loadCompose(t *testing.T, path string, env map[string]string) *composeFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(b, &cf); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	cf.dir = filepath.Dir(path)
	cf.env = env
	if len(cf.Services) == 0 {
		t.Fatalf("%s: no services", path)
	}
	return &cf
}

var interpolation = regexp.MustCompile(`\$\{([A-Z_]+)(:-([^}]*))?\}`)

// interpolate does what compose does with cf.env: ${X:-d} becomes X's
// value or, when X is unset or empty, d; ${X} becomes X's value or ""; and
// $$ becomes $.
func (cf *composeFile) interpolate(s string) string {
	s = interpolation.ReplaceAllStringFunc(s, func(m string) string {
		sub := interpolation.FindStringSubmatch(m)
		if v := cf.env[sub[1]]; v != "" || sub[2] == "" {
			return v
		}
		return sub[3]
	})
	return strings.ReplaceAll(s, "$$", "$")
}

// hostPath is the file of the host that a service sees at container path
// p, through its bind mounts.
func (cf *composeFile) hostPath(t *testing.T, svc composeService, p string) string {
	t.Helper()
	for _, v := range svc.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == p && (strings.HasPrefix(parts[0], ".") || strings.HasPrefix(parts[0], "/")) {
			return filepath.Join(cf.dir, parts[0])
		}
	}
	t.Fatalf("no bind mount gives %s", p)
	return ""
}

// handedOut are the ports freeLoopbackPort gave this test binary, so that
// it never gives one twice before its service binds it.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freeLoopbackPort is a port free on loopback now, below the ephemeral
// range (32768 and up on Linux): a port the system handed out there could
// be taken, before the service binds it, by the local end of one of the
// many connections the services open meanwhile.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		if handedOut.ports[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		handedOut.ports[port] = true
		return port
	}
	t.Fatal("no free loopback port in 20000-31999")
	return 0
}

// natsNode is a NATS service run as a process.
type natsNode struct {
	name                 string
	client, http, routes int
}

var (
	confPort    = regexp.MustCompile(`(?m)^(\s*)port:\s*(\d+)\s*$`)
	confHTTP    = regexp.MustCompile(`(?m)^(\s*)http_port:\s*\d+\s*$`)
	confStore   = regexp.MustCompile(`(?m)^(\s*)store_dir:\s*\S+\s*$`)
	confRouteTo = regexp.MustCompile(`nats://([a-z0-9-]+):6222`)
)

// startNATS runs every NATS service of cf and waits for its health check.
func (cf *composeFile) startNATS(t *testing.T) map[string]*natsNode {
	t.Helper()
	nodes := map[string]*natsNode{}
	for name, svc := range cf.Services {
		if strings.HasPrefix(svc.Image, "nats:") {
			nodes[name] = &natsNode{name: name, client: freeLoopbackPort(t), http: freeLoopbackPort(t), routes: freeLoopbackPort(t)}
		}
	}
	if len(nodes) == 0 {
		t.Fatal("no NATS service")
	}
	bin := natstest.Binary(t)
	for name, n := range nodes {
		svc := cf.Services[name]
		args := slicesClone(svc.Command)
		for i := 0; i+1 < len(args); i++ {
			if args[i] != "-c" {
				continue
			}
			conf, err := os.ReadFile(cf.hostPath(t, svc, args[i+1]))
			if err != nil {
				t.Fatal(err)
			}
			s := string(conf)
			// Ports: 4222 is the client port, the one inside cluster {} is
			// the route port; both listen on loopback only here.
			s = confPort.ReplaceAllStringFunc(s, func(m string) string {
				sub := confPort.FindStringSubmatch(m)
				port := n.client
				if sub[2] == "6222" {
					port = n.routes
				}
				return fmt.Sprintf("%slisten: 127.0.0.1:%d", sub[1], port)
			})
			s = confHTTP.ReplaceAllString(s, fmt.Sprintf("${1}http: 127.0.0.1:%d", n.http))
			s = confStore.ReplaceAllString(s, fmt.Sprintf("${1}store_dir: %q", t.TempDir()))
			s = confRouteTo.ReplaceAllStringFunc(s, func(m string) string {
				peer := nodes[confRouteTo.FindStringSubmatch(m)[1]]
				if peer == nil {
					t.Fatalf("%s routes to %s, which is no NATS service", name, m)
				}
				return fmt.Sprintf("nats://127.0.0.1:%d", peer.routes)
			})
			path := filepath.Join(t.TempDir(), filepath.Base(args[i+1]))
			if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
				t.Fatal(err)
			}
			args[i+1] = path
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = os.Environ()
		for k, v := range svc.Environment {
			cmd.Env = append(cmd.Env, k+"="+cf.interpolate(v))
		}
		var out syncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("%s output:\n%s", name, out.String())
			}
		})
	}
	// Each service's own health check, pointed at its port.
	for name, n := range nodes {
		test := cf.Services[name].Healthcheck.Test
		if len(test) < 2 || test[0] != "CMD" || test[1] != "wget" {
			t.Fatalf("%s: health check %q: want CMD wget … (the image has busybox wget)", name, test)
		}
		url := strings.Replace(test[len(test)-1], "localhost:8222", "127.0.0.1:"+strconv.Itoa(n.http), 1)
		testutil.CheckFor(t, 60*time.Second, func() error {
			resp, err := http.Get(url)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s health: %s", name, resp.Status)
			}
			return nil
		})
	}
	return nodes
}

// hubProc is a hub service running in this process.
type hubProc struct {
	env          map[string]string
	ws, http     string
	ops          int
	token        string
	stop         context.CancelFunc
	done         chan struct{} // closed when the hub has stopped; then err is set
	err          error
	logs         *syncBuffer
	healthchecks []string
}

// startHubs runs every service built from this repository with its
// environment, and waits for its health check.
func (cf *composeFile) startHubs(t *testing.T, nodes map[string]*natsNode) map[string]*hubProc {
	t.Helper()
	hubs := map[string]*hubProc{}
	for name, svc := range cf.Services {
		if svc.Build == nil {
			continue
		}
		env := map[string]string{}
		for k, v := range svc.Environment {
			env[k] = cf.interpolate(v)
		}
		env["NATS_URL"] = regexp.MustCompile(`nats://([a-z0-9-]+):4222`).ReplaceAllStringFunc(env["NATS_URL"], func(m string) string {
			n := nodes[strings.TrimSuffix(strings.TrimPrefix(m, "nats://"), ":4222")]
			if n == nil {
				t.Fatalf("%s: NATS_URL names %s, which is no NATS service", name, m)
			}
			return fmt.Sprintf("nats://127.0.0.1:%d", n.client)
		})
		if p := env["EVENTHUB_CONFIG"]; p != "" {
			env["EVENTHUB_CONFIG"] = cf.hostPath(t, svc, p)
		}
		h := &hubProc{env: env, token: env["WS_TOKEN"], logs: &syncBuffer{}, done: make(chan struct{})}
		wsPort, httpPort := freeLoopbackPort(t), freeLoopbackPort(t)
		h.ops = freeLoopbackPort(t)
		env["WS_PORT"], env["HTTP_PORT"], env["OPS_PORT"] = strconv.Itoa(wsPort), strconv.Itoa(httpPort), strconv.Itoa(h.ops)
		h.ws, h.http = fmt.Sprintf("ws://127.0.0.1:%d", wsPort), fmt.Sprintf("http://127.0.0.1:%d", httpPort)
		h.healthchecks = svc.Healthcheck.Test
		ctx, cancel := context.WithCancel(context.Background())
		h.stop = cancel
		restarts := 0
		if svc.Restart == "unless-stopped" || svc.Restart == "always" || svc.Restart == "on-failure" {
			// As Docker does with the file's restart policy: a hub that
			// exits at start (the cluster still electing its leaders) is
			// started again, a few times.
			restarts = 5
		}
		go func() {
			defer close(h.done)
			for i := 0; ; i++ {
				h.err = run(ctx, []string{"serve"}, func(k string) string { return env[k] }, io.Discard, h.logs)
				if h.err == nil || ctx.Err() != nil || i >= restarts {
					return
				}
				fmt.Fprintf(h.logs, "compose test: %s exited (%v); restarting it, as its restart policy %q says\n", name, h.err, svc.Restart)
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
			}
		}()
		t.Cleanup(func() {
			cancel()
			<-h.done
			if h.err != nil {
				t.Errorf("%s: %v", name, h.err)
			}
			if t.Failed() {
				t.Logf("%s log:\n%s", name, h.logs.String())
			}
		})
		hubs[name] = h
	}
	if len(hubs) == 0 {
		t.Fatal("no hub service")
	}
	for name, h := range hubs {
		test := h.healthchecks
		if len(test) < 3 || test[0] != "CMD" || test[1] != "/eventhub" {
			t.Fatalf("%s: health check %q: want CMD /eventhub healthcheck (the image has no shell)", name, test)
		}
		testutil.CheckFor(t, 60*time.Second, func() error {
			select {
			case <-h.done:
				t.Fatalf("%s stopped: %v", name, h.err)
			default:
			}
			return run(t.Context(), test[2:], func(k string) string { return h.env[k] }, io.Discard, io.Discard)
		})
	}
	return hubs
}

// eventGoesThrough publishes over HTTP through from and consumes it over
// WebSocket, in a group, through to.
func eventGoesThrough(t *testing.T, from, to *hubProc, topic string) {
	t.Helper()
	c, err := client.Dial(t.Context(), to.ws, client.Config{Token: to.token})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	got := make(chan *facade.EventRecord, 4)
	unsub, err := c.Subscribe(t.Context(), topic, "compose-check", func(_ context.Context, dl facade.Delivery) error {
		e := dl.Event()
		got <- e
		return nil
	}, facade.SubscribeOptions{From: facade.FromEarliest})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	defer unsub.Stop(context.Background())
	var id string
	testutil.CheckFor(t, 30*time.Second, func() error {
		req, _ := http.NewRequest(http.MethodPost, from.http+"/publish/"+topic, strings.NewReader(`{"from":"compose"}`))
		req.Header.Set("Authorization", "Bearer "+from.token)
		req.Header.Set("Eventhub-Id", "compose-check-1") // a retry is the same event
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var body struct {
			ID string `json:"id"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("publish: %s", resp.Status)
		}
		id = body.ID
		return nil
	})
	select {
	case e := <-got:
		if e.ID != id || string(e.Payload) != `{"from":"compose"}` {
			t.Fatalf("consumed %+v, published %s", e, id)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the event did not come through")
	}
}

// composeJWTSecret is the JWT_SECRET the compose tests run the files with.
const composeJWTSecret = "compose-jwt-secret-0123456789abcdef"

func TestDockerComposeWithoutDocker(t *testing.T) {
	cf := loadCompose(t, "../../docker-compose.yml", map[string]string{"JWT_SECRET": composeJWTSecret})
	nodes := cf.startNATS(t)
	hubs := cf.startHubs(t, nodes)
	h := hubs["eventhub"]
	if h == nil {
		t.Fatal("no eventhub service")
	}
	eventGoesThrough(t, h, h, "compose.single")
	checkNativeClients(t, nodes, h, "compose.single")
}

func TestClusterComposeWithoutDocker(t *testing.T) {
	cf := loadCompose(t, "../../deploy/compose.cluster.yml", map[string]string{"JWT_SECRET": composeJWTSecret})
	nodes := cf.startNATS(t)
	if len(nodes) != 3 {
		t.Fatalf("%d NATS nodes, want 3", len(nodes))
	}
	hubs := cf.startHubs(t, nodes)
	a, b := hubs["eventhub-a"], hubs["eventhub-b"]
	if a == nil || b == nil {
		t.Fatal("want hubs eventhub-a and eventhub-b")
	}
	eventGoesThrough(t, a, b, "compose.cluster")
	checkNativeClients(t, nodes, a, "compose.cluster")
	// Streams the hubs create keep three replicas, one per node.
	nc := natsConnect(t, nodes["nats1"].client, nats.Token(a.token))
	defer nc.close()
	if r := nc.streamReplicas(t, "compose.cluster"); r != 3 {
		t.Fatalf("the topic's stream has %d replicas, want 3", r)
	}
	checkMonitoring(t, cf, hubs)
}

// checkMonitoring runs the Prometheus and Grafana files against the
// services: Prometheus scrapes the hubs' ops ports with the operator token
// its entrypoint writes, and every query of the dashboard names a metric
// the hub exports (or, jetstream_*, one of the NATS exporters).
func checkMonitoring(t *testing.T, cf *composeFile, hubs map[string]*hubProc) {
	t.Helper()
	prom := cf.Services["prometheus"]
	var pc struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			Authorization struct {
				CredentialsFile string `yaml:"credentials_file"`
			} `yaml:"authorization"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	b, err := os.ReadFile(cf.hostPath(t, prom, "/etc/prometheus/prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &pc); err != nil {
		t.Fatal(err)
	}
	scraped := map[string]bool{}
	for _, sc := range pc.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				svc, port, _ := strings.Cut(target, ":")
				if _, ok := cf.Services[svc]; !ok {
					t.Errorf("prometheus scrapes %s, which is no service", target)
				}
				h := hubs[svc]
				if h == nil {
					continue
				}
				if port != "8082" {
					t.Errorf("prometheus scrapes %s, not the hub's ops port 8082", target)
				}
				if f := sc.Authorization.CredentialsFile; f == "" || !strings.Contains(strings.Join(prom.Entrypoint, " "), f) {
					t.Errorf("job %s reads its token from %q, which the entrypoint does not write", sc.JobName, f)
				}
				// What Prometheus sends: the static token from WS_TOKEN.
				token := cf.interpolate(prom.Environment["WS_TOKEN"])
				req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", h.ops), nil)
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("scraping %s: %s", target, resp.Status)
				}
				scraped[svc] = true
			}
		}
	}
	for name := range hubs {
		if !scraped[name] {
			t.Errorf("prometheus does not scrape %s", name)
		}
	}
	dash, err := os.ReadFile(filepath.Join(cf.dir, "grafana", "dashboards", "eventhub.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	files, _ := filepath.Glob("../../metrics/*.go")
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			b, _ := os.ReadFile(f)
			src.Write(b)
		}
	}
	metricName := regexp.MustCompile(`\b([a-z_]+?)(_bucket)?\b[\[{]`)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, m := range metricName.FindAllStringSubmatch(tg.Expr, -1) {
				name := m[1]
				if strings.HasPrefix(name, "jetstream_") {
					continue
				}
				if !strings.Contains(src.String(), `"`+name+`"`) {
					t.Errorf("panel %q queries %s, which the hub does not export", p.Title, name)
				}
			}
		}
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// natsConn is a plain NATS client of a compose test's cluster.
type natsConn struct{ nc *nats.Conn }

func natsConnect(t *testing.T, port int, opts ...nats.Option) natsConn {
	t.Helper()
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", port), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return natsConn{nc}
}

func (c natsConn) close() { c.nc.Close() }

// streamReplicas is the replica count of the stream that captures topic.
func (c natsConn) streamReplicas(t *testing.T, topic string) int {
	t.Helper()
	js, err := njs.New(c.nc)
	if err != nil {
		t.Fatal(err)
	}
	name, err := js.StreamNameBySubject(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().Config.Replicas
}

// checkNativeClients checks on every NATS node that the hubs are its auth
// callout service, with a scoped token refused since the compose files
// leave nativeScopedClients off.
func checkNativeClients(t *testing.T, nodes map[string]*natsNode, h *hubProc, topic string) {
	t.Helper()
	scoped, err := auth.MintHS256([]byte(composeJWTSecret), auth.MintClaims{Subject: "compose-native",
		Scopes: []string{"publish:" + topic, "subscribe:" + topic}, TTL: time.Minute}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		natstest.CheckCalloutAuth(t, fmt.Sprintf("nats://127.0.0.1:%d", n.client), h.token, scoped, topic)
	}
}
