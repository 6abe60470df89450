// Package bench is the load generator behind `eventhub bench`: publishers
// over HTTP, WebSocket (the Go client) or native NATS, and group or live
// consumers over WebSocket, against a running hub, at a fixed rate or as
// fast as the hub answers. It reports a progress line per interval and a
// final [Summary]. Benchmarks in the repository call [Run] directly.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/client"
	"github.com/eventhub/eventhub/facade"
)

// Transports of the publishers.
const (
	TransportWS   = "ws"
	TransportHTTP = "http"
	TransportNATS = "nats"
)

// Config configures one run. Zero fields take the defaults of
// [Config.withDefaults].
type Config struct {
	// WSURL, HTTPURL and NATSURL address the hub's WebSocket gateway,
	// HTTP port and NATS client port.
	WSURL, HTTPURL, NATSURL string
	// Token authenticates every connection (a hub token; native NATS
	// takes it as its token too). Empty: none.
	Token string
	// Transport of the publishers: TransportWS (default), TransportHTTP
	// or TransportNATS.
	Transport string
	// Topic the run publishes to and consumes (default bench.load).
	Topic string
	// Publishers publish concurrently (default 1; 0 with Consumers set
	// only consumes: set -1).
	Publishers int
	// Consumers subscribe over WebSocket, each on its own connection;
	// Group is their group ("" for live subscriptions, every consumer
	// then gets every event).
	Consumers int
	Group     string
	// Connections the publishers share (default: one per publisher).
	Connections int
	// Size is the payload size in bytes (default 128, at least 16).
	Size int
	// Rate is the total publish rate in events/s; 0 publishes as fast as
	// the hub answers (each publisher waits for its previous answer).
	Rate float64
	// Duration of the run (default 10s).
	Duration time.Duration
	// Progress is the interval of progress lines (default 1s; negative:
	// none).
	Progress time.Duration
	// OpsURL addresses the hub's ops port (default http://127.0.0.1:8082),
	// whose admin API deletes what the run created when it ends.
	OpsURL string
	// Keep leaves what the run created. By default Run deletes the topic
	// when the run created it (its groups go with it), else the group when
	// the run created that; with auth on, this takes a token with the
	// admin scope (or the static token).
	Keep bool
}

func (c Config) withDefaults() Config {
	if c.Transport == "" {
		c.Transport = TransportWS
	}
	if c.Topic == "" {
		c.Topic = "bench.load"
	}
	if c.Publishers == 0 {
		c.Publishers = 1
	}
	if c.Publishers < 0 {
		c.Publishers = 0
	}
	if c.Connections <= 0 {
		c.Connections = max(1, c.Publishers)
	}
	if c.Size == 0 {
		c.Size = 128
	}
	c.Size = max(c.Size, 16)
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Progress == 0 {
		c.Progress = time.Second
	}
	if c.WSURL == "" {
		c.WSURL = "ws://127.0.0.1:8090"
	}
	if c.HTTPURL == "" {
		c.HTTPURL = "http://127.0.0.1:8081"
	}
	if c.NATSURL == "" {
		c.NATSURL = nats.DefaultURL
	}
	if c.OpsURL == "" {
		c.OpsURL = "http://127.0.0.1:8082"
	}
	return c
}

// ErrBadConfig is wrapped by the errors of invalid settings.
var ErrBadConfig = errors.New("bench: invalid configuration")

// Validate reports the first invalid setting.
func (c Config) Validate() error {
	switch c.Transport {
	case "", TransportWS, TransportHTTP, TransportNATS:
	default:
		return fmt.Errorf("%w: transport %q: want ws, http or nats", ErrBadConfig, c.Transport)
	}
	if c.Consumers < 0 || c.Size < 0 || c.Rate < 0 || c.Duration < 0 {
		return fmt.Errorf("%w: negative consumers, size, rate or duration", ErrBadConfig)
	}
	if c.Publishers < 0 && c.Consumers == 0 {
		return fmt.Errorf("%w: no publishers and no consumers", ErrBadConfig)
	}
	if c.Size > 64<<20 {
		return fmt.Errorf("%w: size %d above 64 MiB", ErrBadConfig, c.Size)
	}
	return nil
}

// Summary is the result of a run.
type Summary struct {
	Transport   string  `json:"transport"`
	Topic       string  `json:"topic"`
	Publishers  int     `json:"publishers"`
	Consumers   int     `json:"consumers"`
	Connections int     `json:"connections"`
	Size        int     `json:"size"`
	Rate        float64 `json:"rate"` // asked for; 0 as fast as answered
	Seconds     float64 `json:"seconds"`
	Published   int64   `json:"published"`
	Consumed    int64   `json:"consumed"`
	Errors      int64   `json:"errors"`
	// RateLimited counts publishes refused with rate_limited (part of
	// Errors).
	RateLimited int64 `json:"rate_limited"`
	// PublishRate and ConsumeRate are events/s over the run.
	PublishRate float64 `json:"publish_per_sec"`
	ConsumeRate float64 `json:"consume_per_sec"`
	// Publish latency (request to answer) percentiles, milliseconds.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// LastError is the text of the last error seen, if any.
	LastError string `json:"last_error,omitempty"`
}

// WriteText writes s as a short human-readable report.
func (s Summary) WriteText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "%s publish to %s: %d publishers on %d connections, %d consumers, %d-byte events, %.1fs\n"+
		"published %d (%.0f ev/s), consumed %d (%.0f ev/s), errors %d (rate limited %d)\n"+
		"publish latency p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
		s.Transport, s.Topic, s.Publishers, s.Connections, s.Consumers, s.Size, s.Seconds,
		s.Published, s.PublishRate, s.Consumed, s.ConsumeRate, s.Errors, s.RateLimited, s.P50Ms, s.P99Ms, s.MaxMs)
	if err == nil && s.LastError != "" {
		_, err = fmt.Fprintf(w, "last error: %s\n", s.LastError)
	}
	return err
}

// maxSamples bounds the latencies kept for the final percentiles; beyond
// it every other sample replaces an older one.
const maxSamples = 1 << 20

type stats struct {
	published, consumed, errs, limited atomic.Int64

	mu       sync.Mutex
	interval []time.Duration // since the last progress line
	all      []time.Duration
	seen     int64
	lastErr  string
}

func (s *stats) observe(d time.Duration, err error) {
	if err != nil {
		s.errs.Add(1)
		if errors.Is(err, facade.ErrRateLimited) {
			s.limited.Add(1)
		}
		s.mu.Lock()
		s.lastErr = err.Error()
		s.mu.Unlock()
		return
	}
	s.published.Add(1)
	s.mu.Lock()
	s.interval = append(s.interval, d)
	s.seen++
	if len(s.all) < maxSamples {
		s.all = append(s.all, d)
	} else {
		s.all[s.seen%maxSamples] = d
	}
	s.mu.Unlock()
}

func percentiles(ds []time.Duration) (p50, p99, mx float64) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	slices.Sort(ds)
	at := func(q float64) float64 { return ms(ds[min(len(ds)-1, int(q*float64(len(ds))))]) }
	return at(0.50), at(0.99), ms(ds[len(ds)-1])
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// publisher publishes one event; it blocks until the hub answered.
type publisher func(ctx context.Context, payload []byte) error

// Run runs the load described by cfg until its Duration passed or ctx
// ended, writing a progress line per Progress interval to progress (nil:
// none), and returns the summary. Connection failures before the run
// starts are errors; failures during it are counted in the summary. Unless
// Keep is set, it then deletes what the run created (see [Config.Keep]),
// saying so on progress; when that fails, it returns the summary and an
// error wrapping [ErrCleanup].
func Run(ctx context.Context, cfg Config, progress io.Writer) (Summary, error) {
	if err := cfg.Validate(); err != nil {
		return Summary{}, err
	}
	c := cfg.withDefaults()
	if c.Keep {
		return load(ctx, c, progress)
	}
	clean, err := planCleanup(ctx, c)
	if err != nil {
		return Summary{}, fmt.Errorf("bench: the admin API at %s, which deletes what the run creates, does not answer: %w (give a token with the admin scope, -ops the hub's ops port, or -keep to leave the topic and group)", c.OpsURL, err)
	}
	sum, err := load(ctx, c, progress) // its members have left: their group can go
	if cerr := clean.run(context.WithoutCancel(ctx), progress); err == nil {
		err = cerr
	}
	return sum, err
}

// load runs the load of Run.
func load(ctx context.Context, c Config, progress io.Writer) (Summary, error) {
	sum := Summary{Transport: c.Transport, Topic: c.Topic, Publishers: c.Publishers, Consumers: c.Consumers,
		Connections: c.Connections, Size: c.Size, Rate: c.Rate}
	var closers []func()
	defer func() {
		for _, f := range slices.Backward(closers) {
			f()
		}
	}()
	var st stats
	pubs := make([]publisher, 0, c.Connections)
	for range min(c.Connections, max(c.Publishers, 1)) {
		if c.Publishers == 0 {
			break
		}
		p, closeFn, err := newPublisher(ctx, c)
		if err != nil {
			return sum, err
		}
		closers = append(closers, closeFn)
		pubs = append(pubs, p)
	}
	payload := makePayload(c.Size)
	// One event first: it creates the topic (native NATS cannot) and
	// checks that publishing works at all.
	if c.Publishers > 0 {
		first := pubs[0]
		if c.Transport == TransportNATS {
			p, closeFn, err := newPublisher(ctx, Config{WSURL: c.WSURL, Token: c.Token, Transport: TransportWS, Topic: c.Topic})
			if err != nil {
				return sum, fmt.Errorf("bench: create topic %s over WebSocket first: %w", c.Topic, err)
			}
			closers = append(closers, closeFn)
			first = p
		}
		if err := first(ctx, payload); err != nil {
			return sum, fmt.Errorf("bench: first publish: %w", err)
		}
	}
	for range c.Consumers {
		closeFn, err := startConsumer(ctx, c, &st)
		if err != nil {
			return sum, err
		}
		closers = append(closers, closeFn)
	}

	rctx, cancel := context.WithTimeout(ctx, c.Duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range c.Publishers {
		pub := pubs[i%len(pubs)]
		wg.Go(func() { publishLoop(rctx, c, i, pub, payload, &st) })
	}
	if c.Progress > 0 && progress != nil {
		wg.Go(func() { progressLoop(rctx, c.Progress, start, &st, progress) })
	}
	wg.Wait()
	el := time.Since(start)

	sum.Seconds = el.Seconds()
	sum.Published, sum.Consumed, sum.Errors, sum.RateLimited = st.published.Load(), st.consumed.Load(), st.errs.Load(), st.limited.Load()
	sum.PublishRate = float64(sum.Published) / el.Seconds()
	sum.ConsumeRate = float64(sum.Consumed) / el.Seconds()
	st.mu.Lock()
	sum.P50Ms, sum.P99Ms, sum.MaxMs = percentiles(st.all)
	sum.LastError = st.lastErr
	st.mu.Unlock()
	return sum, nil
}

func publishLoop(ctx context.Context, c Config, i int, pub publisher, payload []byte, st *stats) {
	var every time.Duration
	if c.Rate > 0 {
		every = time.Duration(float64(time.Second) * float64(c.Publishers) / c.Rate)
	}
	// Publishers start spread over one interval, so a fixed rate is smooth.
	next := time.Now().Add(every * time.Duration(i) / time.Duration(max(1, c.Publishers)))
	t := time.NewTimer(0)
	defer t.Stop()
	for ctx.Err() == nil {
		if every > 0 {
			if d := time.Until(next); d > 0 {
				t.Reset(d)
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
			next = next.Add(every)
		}
		s := time.Now()
		err := pub(ctx, payload)
		if ctx.Err() != nil {
			return // the run ended during the call: not the hub's error
		}
		st.observe(time.Since(s), err)
	}
}

func progressLoop(ctx context.Context, every time.Duration, start time.Time, st *stats, w io.Writer) {
	t := time.NewTicker(every)
	defer t.Stop()
	var lastPub, lastCons, lastErr int64
	last := start
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			st.mu.Lock()
			p50, p99, _ := percentiles(st.interval)
			st.interval = st.interval[:0]
			st.mu.Unlock()
			pub, cons, errs := st.published.Load(), st.consumed.Load(), st.errs.Load()
			secs := now.Sub(last).Seconds()
			fmt.Fprintf(w, "%6.1fs  publish %8.0f ev/s  consume %8.0f ev/s  p50 %6.2f ms  p99 %6.2f ms  errors %d\n",
				now.Sub(start).Seconds(), float64(pub-lastPub)/secs, float64(cons-lastCons)/secs, p50, p99, errs-lastErr)
			lastPub, lastCons, lastErr, last = pub, cons, errs, now
		}
	}
}

// makePayload returns a JSON object of exactly size bytes.
func makePayload(size int) []byte {
	const head, tail = `{"pad":"`, `"}`
	return []byte(head + strings.Repeat("x", size-len(head)-len(tail)) + tail)
}

func newPublisher(ctx context.Context, c Config) (publisher, func(), error) {
	switch c.Transport {
	case TransportHTTP:
		hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}, Timeout: 30 * time.Second}
		url := strings.TrimRight(c.HTTPURL, "/") + "/publish/" + c.Topic
		return func(ctx context.Context, payload []byte) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			if c.Token != "" {
				req.Header.Set("Authorization", "Bearer "+c.Token)
			}
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			if resp.StatusCode != http.StatusOK {
				var e struct {
					Error struct{ Code, Msg string } `json:"error"`
				}
				if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
					return &facade.Error{Code: e.Error.Code, Msg: e.Error.Msg}
				}
				return fmt.Errorf("HTTP %s", resp.Status)
			}
			return nil
		}, hc.CloseIdleConnections, nil
	case TransportNATS:
		var opts []nats.Option
		if c.Token != "" {
			opts = append(opts, nats.Token(c.Token))
		}
		nc, err := nats.Connect(c.NATSURL, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("bench: connect to NATS %s: %w", c.NATSURL, err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			return nil, nil, err
		}
		return func(ctx context.Context, payload []byte) error {
			_, err := js.Publish(ctx, c.Topic, payload)
			return err
		}, nc.Close, nil
	}
	cl, err := client.Dial(ctx, c.WSURL, client.Config{Token: c.Token, NoReconnect: true})
	if err != nil {
		return nil, nil, fmt.Errorf("bench: connect to %s: %w", c.WSURL, err)
	}
	return func(ctx context.Context, payload []byte) error {
		_, err := cl.Publish(ctx, c.Topic, payload, facade.PublishOptions{})
		return err
	}, func() { _ = cl.Close() }, nil
}

func startConsumer(ctx context.Context, c Config, st *stats) (func(), error) {
	cl, err := client.Dial(ctx, c.WSURL, client.Config{Token: c.Token, NoReconnect: true})
	if err != nil {
		return nil, fmt.Errorf("bench: consumer: connect to %s: %w", c.WSURL, err)
	}
	sub, err := cl.Subscribe(ctx, c.Topic, c.Group, func(context.Context, facade.Delivery) error {
		st.consumed.Add(1)
		return nil
	}, facade.SubscribeOptions{From: facade.FromLatest})
	if err != nil {
		_ = cl.Close()
		return nil, fmt.Errorf("bench: subscribe to %s: %w", c.Topic, err)
	}
	return func() {
		_ = sub.Stop(context.WithoutCancel(ctx))
		_ = cl.Close()
	}, nil
}
