package projector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventhub/eventhub/facade"
)

// Default topics and group of the process projector.
const (
	DefaultHeartbeats = "heartbeat.received"
	DefaultStates     = "process.state"
	DefaultGroup      = "process-projector"
)

// Defaults of [Config].
const (
	DefaultStaleAfter  = 15 * time.Second
	DefaultCheckEvery  = time.Second
	DefaultMinInterval = 5 * time.Second
)

// Heartbeat is the payload of a heartbeat event.
type Heartbeat struct {
	PID    int     `json:"pid"`
	Name   string  `json:"name"`
	Host   string  `json:"host"`
	CPUPct float64 `json:"cpu_pct"`
	MemMB  float64 `json:"mem_mb"`
	SID    string  `json:"sid,omitempty"`
}

// Status of a process.
type Status string

// Process statuses.
const (
	StatusAlive Status = "alive"
	StatusStale Status = "stale"
)

// ProcessState is the payload of a process state event, keyed by ProcessID.
type ProcessState struct {
	ProcessID  string  `json:"processId"`
	Name       string  `json:"name"`
	Host       string  `json:"host"`
	PID        int     `json:"pid"`
	SID        string  `json:"sid,omitempty"`
	CPUPct     float64 `json:"cpu_pct"`
	MemMB      float64 `json:"mem_mb"`
	LastSeenTS int64   `json:"last_seen_ts"`
	Status     Status  `json:"status"`
}

// ProcessID returns the key of a process: "host:name:pid".
func ProcessID(host, name string, pid int) string {
	return host + ":" + name + ":" + strconv.Itoa(pid)
}

// ErrNotHeartbeat is returned by [ParseHeartbeat] for an event that does
// not say which process it is about.
var ErrNotHeartbeat = errors.New("not a heartbeat")

// ParseHeartbeat reads a heartbeat event: its payload, with the host, name
// and pid it lacks taken from its key when the key is a process id
// ("host:name:pid", as [ProcessID] makes). It fails with [ErrNotHeartbeat],
// naming what is missing, when the payload is not a JSON object or the
// three are not all known.
func ParseHeartbeat(e *facade.EventRecord) (Heartbeat, error) {
	var hb Heartbeat
	if err := json.Unmarshal(e.Payload, &hb); err != nil {
		return Heartbeat{}, fmt.Errorf("%w: payload: %w", ErrNotHeartbeat, err)
	}
	if host, name, pid, ok := parseProcessID(e.Key); ok {
		if hb.Host == "" {
			hb.Host = host
		}
		if hb.Name == "" {
			hb.Name = name
		}
		if hb.PID <= 0 {
			hb.PID = pid
		}
	}
	var missing []string
	if hb.Host == "" {
		missing = append(missing, "host")
	}
	if hb.Name == "" {
		missing = append(missing, "name")
	}
	if hb.PID <= 0 {
		missing = append(missing, "pid (a positive number)")
	}
	if len(missing) > 0 {
		return Heartbeat{}, fmt.Errorf("%w: no %s in the payload or the key (host:name:pid)", ErrNotHeartbeat, strings.Join(missing, ", "))
	}
	return hb, nil
}

// parseProcessID splits a key made by [ProcessID]: the pid after the last
// ':', the name before it, the host (which may hold ':') before that.
func parseProcessID(key string) (host, name string, pid int, ok bool) {
	i := strings.LastIndexByte(key, ':')
	if i < 0 {
		return "", "", 0, false
	}
	pid, err := strconv.Atoi(key[i+1:])
	if err != nil || pid <= 0 {
		return "", "", 0, false
	}
	j := strings.LastIndexByte(key[:i], ':')
	if j <= 0 || j == i-1 {
		return "", "", 0, false
	}
	return key[:j], key[j+1 : i], pid, true
}

// Config configures a [Projector]. The zero value projects
// "heartbeat.received" into "process.state" with the defaults below.
type Config struct {
	// Heartbeats is the topic of heartbeat events (default
	// "heartbeat.received").
	Heartbeats string `yaml:"heartbeats"`
	// States is the compacted topic of process states (default
	// "process.state"). The bus must compact it: {pattern: process.state,
	// compaction: true}.
	States string `yaml:"states"`
	// Group is the durable group reading Heartbeats (default
	// "process-projector"). It must be the projector's own.
	Group string `yaml:"group"`
	// StaleAfter is how long a process may go without a heartbeat before it
	// is "stale" (default 15s).
	StaleAfter time.Duration `yaml:"staleAfter"`
	// CheckEvery is the period of the staleness check (default 1s).
	CheckEvery time.Duration `yaml:"checkEvery"`
	// MinInterval is the least time between two publishes of one process's
	// state when only its metrics, sid or last_seen_ts changed (default 5s);
	// the newest values are published once it has passed, by the next
	// heartbeat or check. Status changes are published at once. A negative
	// MinInterval publishes every change at once.
	MinInterval time.Duration `yaml:"minInterval"`
	// Logger receives the projector's logs; nil discards them.
	Logger *slog.Logger `yaml:"-"`
}

// ErrInvalidConfig is wrapped by the errors of [Config.Validate].
var ErrInvalidConfig = errors.New("projector: invalid config")

// Validate reports the first invalid setting, wrapping [ErrInvalidConfig].
func (c Config) Validate() error {
	c = c.withDefaults()
	for _, t := range []string{c.Heartbeats, c.States} {
		if err := facade.ValidateTopic(t); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	if c.Heartbeats == c.States {
		return fmt.Errorf("%w: heartbeats and states are the same topic %q", ErrInvalidConfig, c.States)
	}
	if err := facade.ValidateGroup(c.Group); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if c.StaleAfter < 0 || c.CheckEvery < 0 {
		return fmt.Errorf("%w: negative staleAfter or checkEvery", ErrInvalidConfig)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Heartbeats == "" {
		c.Heartbeats = DefaultHeartbeats
	}
	if c.States == "" {
		c.States = DefaultStates
	}
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = DefaultStaleAfter
	}
	if c.CheckEvery == 0 {
		c.CheckEvery = DefaultCheckEvery
	}
	if c.MinInterval == 0 {
		c.MinInterval = DefaultMinInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Bus is what the projector needs of an event bus: publish, subscribe, and
// read the newest event of every key (to rebuild its state on start).
type Bus interface {
	facade.Publisher
	facade.Subscriber
	facade.KeyScanner
}

// Projector turns heartbeats into process states. It is safe for concurrent
// use.
type Projector struct {
	cfg   Config
	log   *slog.Logger
	bus   Bus
	start int64 // epoch ms of Start: the grace base of processes rebuilt alive

	// entries is owned by the loop goroutine.
	entries map[string]*entry
	reqs    chan request
	sub     facade.Subscription
	ctx     context.Context // cancelled by Shutdown, ends the loop
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	heartbeats atomic.Uint64
	invalid    atomic.Uint64
	published  atomic.Uint64
	checks     atomic.Uint64
	rebuilt    int

	closeOnce sync.Once
	closeErr  error
}

// entry is the projector's knowledge of one process.
type entry struct {
	hb       Heartbeat
	lastSeen int64 // epoch ms of the newest heartbeat
	// graceFrom (epoch ms), for processes rebuilt alive: staleness counts
	// from max(lastSeen, graceFrom), because last_seen_ts is stored at most
	// every MinInterval and may be older than the process's last heartbeat.
	graceFrom int64
	pub       *ProcessState // last published (or rebuilt) state
	pubAt     time.Time
}

type request struct {
	ctx   context.Context
	e     *facade.EventRecord
	reply chan error
}

// Stats counts what a projector did since it started.
type Stats struct {
	// Rebuilt is the number of process states read back on start.
	Rebuilt int
	// Heartbeats counts heartbeats handled; Invalid those skipped because
	// their payload is not a heartbeat (no host, name or pid).
	Heartbeats, Invalid uint64
	// Published counts process state events published.
	Published uint64
	// Checks counts staleness checks done.
	Checks uint64
}

// Start rebuilds the projector's state from the newest event of every key of
// cfg.States ([facade.KeyScanner.Latest], so the state survives restarts of
// the projector and the hub), then subscribes to cfg.Heartbeats as the
// durable group cfg.Group with one heartbeat in flight, from the group's
// cursor (the earliest retained heartbeat for a new group), and starts the
// staleness check. It returns once both run.
//
// When bus implements [facade.CompactionReporter], Start refuses a States
// topic that is not compacted (facade.ErrNotCompacted). Errors wrap
// [ErrInvalidConfig] or the bus's errors.
func Start(ctx context.Context, bus Bus, cfg Config) (*Projector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	p := &Projector{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "process-projector"),
		bus:     bus,
		start:   time.Now().UnixMilli(),
		entries: make(map[string]*entry),
		reqs:    make(chan request),
	}
	if _, err := facade.RequireCompacted(ctx, bus, cfg.States); err != nil {
		return nil, fmt.Errorf("projector: states topic: %w", err)
	}
	if err := p.rebuild(ctx); err != nil {
		return nil, err
	}
	p.ctx, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	p.wg.Go(p.loop)
	sub, err := bus.Subscribe(ctx, cfg.Heartbeats, cfg.Group, p.handle, facade.SubscribeOptions{
		From:        facade.FromEarliest,
		MaxInFlight: 1,
	})
	if err != nil {
		p.cancel()
		p.wg.Wait()
		return nil, fmt.Errorf("projector: subscribe to %s: %w", cfg.Heartbeats, err)
	}
	p.sub = sub
	p.log.Info("process projector started", "heartbeats", cfg.Heartbeats, "states", cfg.States,
		"rebuilt", p.rebuilt, "stale_after", cfg.StaleAfter, "min_interval", cfg.MinInterval)
	return p, nil
}

// rebuild reads the stored states back.
func (p *Projector) rebuild(ctx context.Context) error {
	_, err := p.bus.Latest(ctx, p.cfg.States, func(e *facade.EventRecord) error {
		var st ProcessState
		if err := json.Unmarshal(e.Payload, &st); err != nil || e.Key == "" {
			p.log.Warn("unreadable process state skipped", "key", e.Key, "id", e.ID, "err", err)
			return nil
		}
		en := &entry{
			hb:       Heartbeat{PID: st.PID, Name: st.Name, Host: st.Host, CPUPct: st.CPUPct, MemMB: st.MemMB, SID: st.SID},
			lastSeen: st.LastSeenTS,
			pub:      &st,
			pubAt:    e.Time(),
		}
		if st.Status == StatusAlive {
			en.graceFrom = p.start
		}
		p.entries[e.Key] = en
		return nil
	})
	if errors.Is(err, facade.ErrNotFound) {
		return nil // no states yet
	}
	if err != nil {
		return fmt.Errorf("projector: rebuild from %s: %w", p.cfg.States, err)
	}
	p.rebuilt = len(p.entries)
	return nil
}

// handle is the heartbeat group's handler: it hands the heartbeat to the loop
// and returns the loop's verdict, so the heartbeat is acknowledged only once
// the state it changed is stored.
func (p *Projector) handle(ctx context.Context, d facade.Delivery) error {
	e := d.Event()
	r := request{ctx: ctx, e: e, reply: make(chan error, 1)}
	select {
	case p.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-p.ctx.Done():
		return facade.ErrClosed
	}
	select {
	case err := <-r.reply:
		return err
	case <-p.ctx.Done():
		return facade.ErrClosed
	}
}

// loop owns the entries: it applies heartbeats and runs the staleness check,
// one at a time, so the states of one process are published in order.
func (p *Projector) loop() {
	t := time.NewTicker(p.cfg.CheckEvery)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case r := <-p.reqs:
			r.reply <- p.apply(r.ctx, r.e)
		case <-t.C:
			p.check(p.ctx)
		}
	}
}

func (p *Projector) apply(ctx context.Context, e *facade.EventRecord) error {
	hb, err := ParseHeartbeat(e)
	if err != nil {
		p.invalid.Add(1)
		p.log.Warn("heartbeat skipped", "id", e.ID, "key", e.Key, "err", err)
		return nil
	}
	p.heartbeats.Add(1)
	key := ProcessID(hb.Host, hb.Name, hb.PID)
	en := p.entries[key]
	if en == nil {
		en = &entry{hb: hb, lastSeen: e.TS}
		p.entries[key] = en
	} else if e.TS >= en.lastSeen { // an older heartbeat (a replay) changes nothing
		en.hb, en.lastSeen = hb, e.TS
	}
	return p.evaluate(ctx, key, en, time.Now())
}

// check publishes the processes whose status changed with time, and the
// updates MinInterval held back.
func (p *Projector) check(ctx context.Context) {
	now := time.Now()
	for key, en := range p.entries {
		if err := p.evaluate(ctx, key, en, now); err != nil {
			if ctx.Err() != nil {
				return
			}
			p.log.Warn("publish process state; retrying at the next check", "process", key, "err", err)
		}
	}
	p.checks.Add(1)
}

// evaluate publishes en's state if it should be.
func (p *Projector) evaluate(ctx context.Context, key string, en *entry, now time.Time) error {
	st := p.state(key, en, now)
	if !p.due(en, st, now) {
		return nil
	}
	if _, err := facade.PublishJSON(ctx, p.bus, p.cfg.States, st, facade.PublishOptions{Key: key}); err != nil {
		return fmt.Errorf("publish state of %s: %w", key, err)
	}
	p.published.Add(1)
	en.pub, en.pubAt = &st, now
	if st.Status != StatusAlive {
		en.graceFrom = 0
	}
	p.log.Debug("process state published", "process", key, "status", st.Status)
	return nil
}

func (p *Projector) state(key string, en *entry, now time.Time) ProcessState {
	status := StatusAlive
	if now.UnixMilli()-max(en.lastSeen, en.graceFrom) > p.cfg.StaleAfter.Milliseconds() {
		status = StatusStale
	}
	return ProcessState{
		ProcessID: key, Name: en.hb.Name, Host: en.hb.Host, PID: en.hb.PID, SID: en.hb.SID,
		CPUPct: en.hb.CPUPct, MemMB: en.hb.MemMB, LastSeenTS: en.lastSeen, Status: status,
	}
}

// due says whether st must be published: status changes at once, other
// changes once MinInterval has passed since the last publish, no change
// never.
func (p *Projector) due(en *entry, st ProcessState, now time.Time) bool {
	switch {
	case en.pub == nil, st.Status != en.pub.Status:
		return true
	case st == *en.pub:
		return false
	case p.cfg.MinInterval < 0:
		return true
	}
	return now.Sub(en.pubAt) >= p.cfg.MinInterval
}

// Stats returns the projector's counters. It does not block.
func (p *Projector) Stats() Stats {
	return Stats{
		Rebuilt: p.rebuilt, Heartbeats: p.heartbeats.Load(), Invalid: p.invalid.Load(),
		Published: p.published.Load(), Checks: p.checks.Load(),
	}
}

// Shutdown stops the heartbeat subscription (waiting for the heartbeat being
// applied; an unacknowledged one goes back to the group) and the staleness
// check. It returns ctx.Err() if that takes longer than ctx allows. It is
// idempotent.
func (p *Projector) Shutdown(ctx context.Context) error {
	p.closeOnce.Do(func() {
		err := p.sub.Stop(ctx)
		p.cancel()
		done := make(chan struct{})
		go func() { p.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = errors.Join(err, ctx.Err())
		}
		p.closeErr = err
		p.log.Info("process projector stopped", "published", p.published.Load())
	})
	return p.closeErr
}

// Close is Shutdown with a 30 s limit.
func (p *Projector) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return p.Shutdown(ctx)
}
