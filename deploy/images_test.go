package deploy_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// The engine in CI reaches no container registry, so the base images the
// files name cannot be pulled. Where one is missing, a stand-in with the
// same name and what the files use of it is built from this machine's own
// parts, and the Dockerfile and the compose files then run unchanged:
//
//   - golang:<v>: busybox (for RUN's /bin/sh), this machine's Go toolchain
//     and a module proxy on disk holding go.sum's modules (GOPROXY=file://),
//     so the Dockerfile's `go mod download` and `go build` run as written;
//   - gcr.io/distroless/static-debian12:nonroot: an empty image with the
//     nonroot user (65532), /tmp and the CA certificates;
//   - nats:<v>-alpine: a nats-server built from go.mod's version, with
//     busybox for the health check's wget.
//
// Each stand-in carries the label eventhub.standin with a hash of what it
// was built from, and is built again when that changes; an image of the
// same name without the label (pulled from a registry) is used as it is.

const standInLabel = "eventhub.standin"

// busybox is a statically linked busybox (Debian's busybox-static, which
// scripts/deps.sh installs where a Docker engine runs).
func busybox(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		if out, err := exec.Command("file", "-L", p).Output(); err == nil && bytes.Contains(out, []byte("statically linked")) {
			return p
		}
	}
	t.Fatal("no static busybox: install Debian's busybox-static (scripts/deps.sh does where a Docker engine runs)")
	return ""
}

// imageLabel is the value of the stand-in label of a local image, and
// whether the image exists at all.
func imageLabel(ref string) (label string, exists bool) {
	out, err := exec.Command("docker", "image", "inspect", "--format",
		`{{index .Config.Labels "`+standInLabel+`"}}`, ref).Output()
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(out)), true
}

// standIn builds image ref from dir (a Dockerfile and its context) unless a
// local image of that name was pulled, or was built from the same inputs.
func standIn(t *testing.T, ref, hash, dir string) {
	t.Helper()
	label, exists := imageLabel(ref)
	if exists && (label == "" || label == hash) {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, "Dockerfile"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "LABEL %s=%s\n", standInLabel, hash)
	f.Close()
	start := time.Now()
	dockerOut(t, "build", "-q", "-t", ref, dir)
	t.Logf("built the stand-in for %s in %v", ref, time.Since(start).Round(time.Second))
}

// dockerfileBases are the images the Dockerfile's FROM lines name.
func dockerfileBases(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var refs []string
	from := regexp.MustCompile(`(?i)^FROM\s+(\S+)`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := from.FindStringSubmatch(sc.Text()); m != nil {
			refs = append(refs, m[1])
		}
	}
	return refs
}

// standInImages makes sure the Dockerfile's base images and the compose
// files' NATS image exist on the engine.
func standInImages(t *testing.T, natsImage string) {
	t.Helper()
	bb := busybox(t)
	for _, ref := range dockerfileBases(t, "../Dockerfile") {
		switch {
		case strings.HasPrefix(ref, "golang:"):
			standInGolang(t, ref, bb)
		case strings.HasPrefix(ref, "gcr.io/distroless/static"):
			standInDistroless(t, ref)
		default:
			t.Fatalf("the Dockerfile names %s, for which this test has no stand-in", ref)
		}
	}
	standInNATS(t, natsImage, bb)
}

func hashOf(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		io.WriteString(h, p)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func fileHash(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return hashOf(string(b))
}

func goEnv(t *testing.T, key string) string {
	t.Helper()
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", key, err)
	}
	return strings.TrimSpace(string(out))
}

func standInGolang(t *testing.T, ref, bb string) {
	t.Helper()
	goroot, version := goEnv(t, "GOROOT"), goEnv(t, "GOVERSION")
	if want := strings.TrimPrefix(ref, "golang:"); !strings.HasPrefix(strings.TrimPrefix(version, "go"), want) {
		t.Fatalf("the Dockerfile builds with %s, this machine has %s", ref, version)
	}
	hash := hashOf(ref, version, fileHash(t, "../go.sum"))
	if label, exists := imageLabel(ref); exists && (label == "" || label == hash) {
		return
	}
	dir := t.TempDir()
	// The module proxy: exactly what `go mod download` fetches, copied from
	// this machine's module cache (which fetches what it lacks first).
	run(t, "..", nil, "go", "mod", "download")
	proxy := filepath.Join(dir, "modcache")
	run(t, "..", []string{"GOMODCACHE=" + proxy, "GOPROXY=file://" + goEnv(t, "GOMODCACHE") + "/cache/download",
		"GOSUMDB=off", "GOFLAGS=-mod=mod"}, "go", "mod", "download")
	if err := os.Rename(filepath.Join(proxy, "cache", "download"), filepath.Join(dir, "goproxy")); err != nil {
		t.Fatal(err)
	}
	run(t, "", nil, "chmod", "-R", "u+w", proxy)
	if err := os.RemoveAll(proxy); err != nil {
		t.Fatal(err)
	}
	run(t, "", nil, "cp", "-a", goroot, filepath.Join(dir, "go"))
	run(t, "", nil, "cp", bb, filepath.Join(dir, "busybox"))
	writeFile(t, filepath.Join(dir, "Dockerfile"), `FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
RUN ["/bin/busybox", "sh", "-c", "mkdir -p /tmp /root /go && chmod 1777 /tmp"]
COPY go /usr/local/go
COPY goproxy /goproxy
ENV PATH=/usr/local/go/bin:/go/bin:/bin GOPATH=/go HOME=/root GOTOOLCHAIN=local GOPROXY=file:///goproxy GOSUMDB=off
`)
	standIn(t, ref, hash, dir)
}

func standInDistroless(t *testing.T, ref string) {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	writeFile(t, filepath.Join(root, "etc", "passwd"), "root:x:0:0:root:/root:/sbin/nologin\n"+
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")
	writeFile(t, filepath.Join(root, "etc", "group"), "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")
	certs, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatalf("CA certificates for the distroless stand-in: %v", err)
	}
	writeFile(t, filepath.Join(root, "etc", "ssl", "certs", "ca-certificates.crt"), string(certs))
	for _, d := range []string{"tmp", "home/nonroot"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o777); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(root, "tmp"), 0o1777)
	dockerfile := `FROM scratch
COPY root /
USER 65532:65532
WORKDIR /home/nonroot
`
	writeFile(t, filepath.Join(dir, "Dockerfile"), dockerfile)
	standIn(t, ref, hashOf(ref, dockerfile, string(certs)), dir)
}

func standInNATS(t *testing.T, ref, bb string) {
	t.Helper()
	// The compose files' NATS minor version is go.mod's.
	v := regexp.MustCompile(`^nats:(\d+\.\d+)`).FindStringSubmatch(ref)
	if v == nil || !strings.HasPrefix(server.VERSION, v[1]+".") {
		t.Fatalf("the compose files run %s, go.mod has nats-server %s: keep them in step", ref, server.VERSION)
	}
	dockerfile := `FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
COPY nats-server /nats-server
ENTRYPOINT ["/nats-server"]
`
	hash := hashOf(ref, server.VERSION, dockerfile)
	if label, exists := imageLabel(ref); exists && (label == "" || label == hash) {
		return
	}
	dir := t.TempDir()
	run(t, "..", []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-o", filepath.Join(dir, "nats-server"), "github.com/nats-io/nats-server/v2")
	run(t, "", nil, "cp", bb, filepath.Join(dir, "busybox"))
	writeFile(t, filepath.Join(dir, "Dockerfile"), dockerfile)
	standIn(t, ref, hash, dir)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// run runs a command in dir with env added, and fails the test with its
// output when it fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func dockerOut(t *testing.T, args ...string) string {
	t.Helper()
	return strings.TrimSpace(run(t, "", nil, "docker", args...))
}
