package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
)

// principalAccounts gives each scoped native client of the embedded server
// a NATS account of its own, holding nothing but imports from the hub's
// account (the global one, where the streams live) of the subjects its
// policy grants:
//
//   - a service import for each subject it may publish to: its topics and
//     the JetStream API subjects of its grant (natsgrant). The server rewrites the
//     reply subject of every request crossing an import into a private one,
//     so whatever reply subject a client names, JetStream's answer comes
//     back into the client's own account: it cannot have the server write
//     into a topic it may not publish to, nor into the JetStream API;
//   - a stream import for each subject it may subscribe to, so live (core
//     NATS) subscriptions see the events published in the hub's account on
//     those topics: by the hub (for WebSocket, HTTP and Go clients) and by
//     admin native clients. NATS passes no message that arrived through a
//     service import on to a stream import, so another scoped native
//     client's publishes reach it through JetStream (the topic's stream),
//     not live.
//
// Its _INBOX.> is its own: other principals' replies (pulled events among
// them) never reach it. Subject permissions still apply within the account,
// as the finer filter (deny lists, groups).
//
// An account belongs to one principal and policy while it has connections:
// connections of a principal with the same policy share it. As the hub's
// streams grow, so do the JetStream grants of a policy, and a new
// connection adds the imports it lacks to the account. Once its last
// connection has left and no answer to its requests is pending, the
// account is freed (see sweep): its imports are dropped and it waits, empty,
// for the next principal that connects. NATS cannot remove an account from
// a running server, so the server holds as many as principals were
// connected at once, each about 16 KB empty and 20-30 KB with the imports of
// a policy of a few topics.
//
// Every request that crosses an import leaves the hub's account a response
// mapping until it is answered (see export); an account that holds more
// than maxPendingResponses of them (a client pulling in a tight loop) has
// its connections closed, which drops them all (see guard).
type principalAccounts struct {
	mu       sync.Mutex
	srv      *server.Server
	log      *slog.Logger
	exported map[string]bool
	// current holds the account of each principal and policy, by
	// accountName: a later one replaces an account that could not take a
	// connection's imports.
	current map[string]*principalAccount
	// byName holds every account made, by its name on the server; idle
	// are those no principal holds.
	byName map[string]*principalAccount
	idle   []*principalAccount
	made   int

	stop chan struct{}
	wg   sync.WaitGroup
}

// principalAccount is an account and the imports it holds.
type principalAccount struct {
	acc *server.Account
	// key is the accountName of the principal holding it; "" while idle.
	key string
	// pins counts the connections being authorized into it: it is not
	// freed before they have joined it.
	pins     int
	services []string
	streams  []string
	topics   []string // of every plan it took (see StreamNames)
}

// Timings and bounds of principal accounts.
const (
	// sweepEvery is how often accounts whose connections have all left
	// are freed.
	sweepEvery = time.Second
	// guardEvery is how often the response mappings of accounts are
	// counted.
	guardEvery = 50 * time.Millisecond
	// maxPendingResponses bounds the response mappings one account holds
	// in the hub's account (about 0.5-0.8 KB each): about 8-13 MB.
	maxPendingResponses = 16 * 1024
)

// errNoServer: the embedded server is not running yet.
var errNoServer = errors.New("auth: the embedded NATS server is not running yet")

// importPlan is what a principal's account imports from the hub's account.
type importPlan struct {
	account  string   // the account's name (accountName)
	services []string // publish side: topics and JetStream API subjects
	streams  []string // subscribe side: topics
	topics   []string // the topic subjects it may publish or subscribe to
}

// accountName names the account of principal subject with a policy whose
// NATS allow lists are pub and sub.
func accountName(subject string, pub, sub []string) string {
	h := sha256.New()
	for _, part := range [][]string{{subject}, pub, sub} {
		for _, s := range part {
			h.Write([]byte(s))
			h.Write([]byte{0})
		}
		h.Write([]byte{1})
	}
	return "EVENTHUB_" + strings.ToUpper(hex.EncodeToString(h.Sum(nil)[:16]))
}

// setServer sets the server the accounts are made on, and starts freeing
// idle accounts and guarding against floods of requests, until close.
func (a *principalAccounts) setServer(s *server.Server, log *slog.Logger) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.srv != nil {
		return
	}
	stop := make(chan struct{})
	a.srv, a.log, a.stop = s, log, stop
	a.wg.Go(func() { a.watch(stop) })
}

// close stops freeing and guarding accounts.
func (a *principalAccounts) close() {
	a.mu.Lock()
	stop := a.stop
	a.stop = nil
	a.mu.Unlock()
	if stop != nil {
		close(stop)
		a.wg.Wait()
	}
}

func (a *principalAccounts) watch(stop <-chan struct{}) {
	guard, sweep := time.NewTicker(guardEvery), time.NewTicker(sweepEvery)
	defer guard.Stop()
	defer sweep.Stop()
	for {
		select {
		case <-stop:
			return
		case <-guard.C:
			a.guard()
		case <-sweep.C:
			a.sweep()
		}
	}
}

// account returns the account of plan.account with plan's imports, pinned
// until release is called (once the connection has joined it): taking an
// idle account (and making the hub account's exports it needs) on first
// use, and adding to it the imports of plan it lacks. An import that would
// overlap one the account holds (which would bring messages in twice)
// gives the connection another account instead.
func (a *principalAccounts) account(plan importPlan) (acc *server.Account, release func(), err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.srv == nil {
		return nil, nil, errNoServer
	}
	if a.current == nil {
		a.current, a.byName = map[string]*principalAccount{}, map[string]*principalAccount{}
	}
	key := plan.account
	pa := a.current[key]
	services, streams := missing(pa, plan)
	var older []string // the topics of the account a new one replaces
	if pa != nil && (collides(pa.services, services) || collides(pa.streams, streams)) {
		older = pa.topics
		pa, services, streams = nil, plan.services, plan.streams
	}
	if pa == nil {
		if pa, err = a.take(); err != nil {
			return nil, nil, err
		}
		// Stream lookups answer for the topics of both.
		pa.key, pa.topics = key, slices.Clone(older)
		a.current[key] = pa
	}
	pa.addTopics(plan.topics)
	pa.pins++
	release = func() {
		a.mu.Lock()
		pa.pins--
		a.mu.Unlock()
	}
	name := pa.acc.Name
	hub := a.srv.GlobalAccount()
	if err := a.export(hub, name, services, streams); err != nil {
		release()
		return nil, nil, err
	}
	for _, s := range services {
		if err := pa.acc.AddServiceImport(hub, s, importTo(name, s)); err != nil {
			release()
			return nil, nil, fmt.Errorf("auth: native client account: import %q: %w", s, err)
		}
		pa.services = append(pa.services, s)
	}
	for _, s := range streams {
		if err := pa.acc.AddStreamImport(hub, s, ""); err != nil {
			release()
			return nil, nil, fmt.Errorf("auth: native client account: import %q: %w", s, err)
		}
		pa.streams = append(pa.streams, s)
	}
	return pa.acc, release, nil
}

// take returns an idle account, or a new one.
func (a *principalAccounts) take() (*principalAccount, error) {
	if n := len(a.idle); n > 0 {
		pa := a.idle[n-1]
		a.idle = a.idle[:n-1]
		return pa, nil
	}
	a.made++
	acc, err := a.srv.RegisterAccount(fmt.Sprintf("EVENTHUB_%d", a.made))
	if err != nil {
		return nil, fmt.Errorf("auth: native client account: %w", err)
	}
	pa := &principalAccount{acc: acc}
	a.byName[acc.Name] = pa
	return pa, nil
}

// sweep frees the accounts whose connections have all left: no connection
// is joining it, and no answer to its requests is pending (which, once the
// account is another principal's, would reach its inboxes). A freed
// account drops its imports and becomes idle.
func (a *principalAccounts) sweep() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, pa := range a.byName {
		if pa.key == "" || pa.pins > 0 || pa.acc.NumLocalConnections() > 0 || pa.acc.NumPendingReverseResponses() > 0 {
			continue
		}
		if a.current[pa.key] == pa {
			delete(a.current, pa.key)
		}
		pa.key, pa.services, pa.streams, pa.topics = "", nil, nil, nil
		if !a.strip(pa.acc) {
			// Never handed out again: it may still hold its imports.
			delete(a.byName, pa.acc.Name)
			continue
		}
		a.idle = append(a.idle, pa)
	}
}

// noImport is where, in the hub's account, the one import a freed account
// keeps leads: nothing answers there.
const noImport = apiPrefix + "NONE"

// strip drops the imports of a freed account: claims replace them. Claims
// also have the server give the account JetStream's own API (whose
// answers, "JetStream not enabled for account", would race the hub's
// through the imports of the account's next holder), unless an import
// already covers $JS.API.INFO: the one import they hold, of a subject no
// native client may publish to, leads nowhere.
func (a *principalAccounts) strip(acc *server.Account) bool {
	hub := a.srv.GlobalAccount()
	if err := a.export(hub, "", []string{noImport}, nil); err != nil {
		a.log.Error("native client account not freed", "account", acc.Name, "err", err)
		return false
	}
	claims := jwt.NewAccountClaims(acc.Name)
	claims.Imports.Add(&jwt.Import{Type: jwt.Service, Account: hub.Name, Subject: noImport, LocalSubject: jwt.RenamingSubject(jsAPI + "INFO")})
	a.srv.UpdateAccountClaims(acc, claims)
	return true
}

// guard closes the connections of every account that holds more than
// maxPendingResponses response mappings in the hub's account. NATS keeps
// the mapping of a request until its answer is complete: for a pull, until
// the server's response threshold (2 minutes) has passed since its last
// message, so a client pulling in a tight loop (each pull answered at once
// when the consumer has more waiting than it takes) would hold one per
// pull for two minutes. Closing its connections drops its mappings at
// once: the server frees the mappings of replies no one listens to.
func (a *principalAccounts) guard() {
	a.mu.Lock()
	srv := a.srv
	a.mu.Unlock()
	hub := srv.GlobalAccount()
	if hub.NumPendingAllResponses() <= maxPendingResponses {
		return
	}
	az, err := srv.Accountz(&server.AccountzOptions{Account: hub.Name})
	if err != nil || az.Account == nil {
		return
	}
	per := map[string]int{}
	for _, r := range az.Account.Responses {
		per[r.Account]++
	}
	for name, n := range per {
		if n <= maxPendingResponses {
			continue
		}
		a.mu.Lock()
		pa := a.byName[name]
		a.mu.Unlock()
		if pa == nil {
			continue
		}
		cz, err := srv.Connz(&server.ConnzOptions{Account: name, Limit: 1 << 16})
		if err != nil {
			continue
		}
		a.log.Warn("native NATS client disconnected: too many requests awaiting answers", "account", name, "pending", n, "connections", len(cz.Conns))
		for _, c := range cz.Conns {
			_ = srv.DisconnectClientByID(c.Cid)
		}
	}
}

// inUse returns the number of accounts principals hold, and of idle ones.
func (a *principalAccounts) inUse() (held, idle int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.byName) - len(a.idle), len(a.idle)
}

// importTo is the subject in the hub's account that the import of s in the
// account named name leads to: the hub answers the stream lookups itself
// (see StreamNames); every other subject is the same on both sides.
func importTo(name, s string) string {
	if s == jsAPI+"STREAM.NAMES" {
		return apiPrefix + name + ".STREAM.NAMES"
	}
	return s
}

func (pa *principalAccount) addTopics(topics []string) {
	for _, t := range topics {
		if !slices.Contains(pa.topics, t) {
			pa.topics = append(pa.topics, t)
		}
	}
}

// topicsOf returns the topic subjects of the account named name.
func (a *principalAccounts) topicsOf(name string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if pa := a.byName[name]; pa != nil {
		return slices.Clone(pa.topics)
	}
	return nil
}

// missing returns the imports of plan that pa (nil: a new account) lacks.
func missing(pa *principalAccount, plan importPlan) (services, streams []string) {
	if pa == nil {
		return plan.services, plan.streams
	}
	return without(plan.services, pa.services), without(plan.streams, pa.streams)
}

// without returns the subjects of want that held does not have.
func without(want, held []string) []string {
	have := make(map[string]bool, len(held))
	for _, h := range held {
		have[h] = true
	}
	var out []string
	for _, w := range want {
		if !have[w] {
			out = append(out, w)
		}
	}
	return out
}

// export has the hub account export what an account imports. Every
// request crossing an import leaves the hub's account a response mapping
// until its answer is sent: one for a singleton answer, and for a pull
// (answered with many messages, the only streamed answer granted) until
// the server's response threshold (2 minutes) passes or the client stops
// listening (guard bounds how many one account holds). Direct gets are
// singletons: a batched direct get returns its first message only. The
// exports are
// public, but only this server's principal accounts import anything: no
// other account exists on the embedded server.
func (a *principalAccounts) export(hub *server.Account, name string, services, streams []string) error {
	if a.exported == nil {
		a.exported = map[string]bool{}
	}
	for _, s := range services {
		s = importTo(name, s)
		if a.exported["service "+s] {
			continue
		}
		rt := server.Singleton
		if strings.HasPrefix(s, jsAPI+"CONSUMER.MSG.NEXT.") {
			rt = server.Streamed
		}
		if err := hub.AddServiceExportWithResponse(s, rt, nil); err != nil {
			return fmt.Errorf("auth: export %q: %w", s, err)
		}
		a.exported["service "+s] = true
	}
	for _, s := range streams {
		if a.exported["stream "+s] {
			continue
		}
		if err := hub.AddStreamExport(s, nil); err != nil {
			return fmt.Errorf("auth: export %q: %w", s, err)
		}
		a.exported["stream "+s] = true
	}
	return nil
}
