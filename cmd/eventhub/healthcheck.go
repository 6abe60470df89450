package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// healthcheck asks the hub's ops port whether it is ready (GET /readyz) and
// succeeds only on 200: the health check of images that carry no shell or
// HTTP client (docker compose's healthcheck runs `eventhub healthcheck`).
func healthcheck(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eventhub healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := newFlags(fs, getenv)
	var port int
	var url string
	var timeout time.Duration
	f.int(&port, "ops-port", "OPS_PORT", 8082, "the hub's ops port, on 127.0.0.1")
	fs.StringVar(&url, "url", "", "readiness URL to ask instead (default http://127.0.0.1:<ops-port>/readyz)")
	fs.DurationVar(&timeout, "timeout", 2*time.Second, "how long to wait for the answer")
	if err := f.parse(args); err != nil {
		return err
	}
	if url == "" {
		url = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/readyz"
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("not ready: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return errors.New("not ready: " + resp.Status + ": " + string(body))
	}
	_, _ = stdout.Write(body)
	return nil
}
