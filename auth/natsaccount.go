package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

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
// An account belongs to one principal and policy: connections of a
// principal with the same policy share it. As the hub's streams grow, so
// do the JetStream grants of a policy, and a new connection adds the
// imports it lacks to the account. Accounts are kept until the server
// stops: one per principal and policy (about 36 KB with a dozen imports).
type principalAccounts struct {
	mu       sync.Mutex
	srv      *server.Server
	exported map[string]bool
	// accounts by accountName; a later generation replaces an account
	// that could not take a connection's imports.
	accounts   map[string]*principalAccount
	generation int
}

// principalAccount is an account and the imports it holds.
type principalAccount struct {
	acc      *server.Account
	services []string
	streams  []string
	topics   []string // of every plan it took (see StreamNames)
}

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

func (a *principalAccounts) setServer(s *server.Server) {
	a.mu.Lock()
	a.srv = s
	a.mu.Unlock()
}

// account returns the account plan.account with plan's imports, making it (and
// the hub account's exports it needs) on first use, and adding to it the
// imports of plan it lacks. An import that would overlap one the account
// holds (which would bring messages in twice) gives the connection a new
// account instead.
func (a *principalAccounts) account(plan importPlan) (*server.Account, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.srv == nil {
		return nil, errNoServer
	}
	if a.accounts == nil {
		a.accounts = map[string]*principalAccount{}
	}
	name := plan.account
	pa := a.accounts[name]
	services, streams := missing(pa, plan)
	if pa != nil && len(services) == 0 && len(streams) == 0 {
		pa.addTopics(plan.topics)
		return pa.acc, nil
	}
	key := name
	var older []string // the topics of the generation a new one replaces
	if pa != nil && (collides(pa.services, services) || collides(pa.streams, streams)) {
		older = pa.topics
		pa, services, streams = nil, plan.services, plan.streams
		a.generation++
		name = fmt.Sprintf("%s_%d", name, a.generation)
	}
	hub := a.srv.GlobalAccount()
	if err := a.export(hub, key, services, streams); err != nil {
		return nil, err
	}
	if pa == nil {
		acc, err := a.srv.RegisterAccount(name)
		if err != nil {
			return nil, fmt.Errorf("auth: native client account: %w", err)
		}
		// Stream lookups go by key: they answer for both generations.
		pa = &principalAccount{acc: acc, topics: slices.Clone(older)}
		a.accounts[key] = pa
	}
	pa.addTopics(plan.topics)
	for _, s := range services {
		if err := pa.acc.AddServiceImport(hub, s, importTo(key, s)); err != nil {
			return nil, fmt.Errorf("auth: native client account: import %q: %w", s, err)
		}
		pa.services = append(pa.services, s)
	}
	for _, s := range streams {
		if err := pa.acc.AddStreamImport(hub, s, ""); err != nil {
			return nil, fmt.Errorf("auth: native client account: import %q: %w", s, err)
		}
		pa.streams = append(pa.streams, s)
	}
	return pa.acc, nil
}

// importTo is the subject in the hub's account that the import of s in the
// account named key leads to: the hub answers the stream lookups itself
// (see StreamNames); every other subject is the same on both sides.
func importTo(key, s string) string {
	if s == jsAPI+"STREAM.NAMES" {
		return apiPrefix + key + ".STREAM.NAMES"
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

// topicsOf returns the topic subjects of the account named key.
func (a *principalAccounts) topicsOf(key string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if pa := a.accounts[key]; pa != nil {
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
// listening. Direct gets are singletons: a batched direct get returns its
// first message only. The exports are
// public, but only this server's principal accounts import anything: no
// other account exists on the embedded server.
func (a *principalAccounts) export(hub *server.Account, key string, services, streams []string) error {
	if a.exported == nil {
		a.exported = map[string]bool{}
	}
	for _, s := range services {
		s = importTo(key, s)
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
