package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/token"
)

// NATS authenticates native NATS clients of the embedded server with the
// hub's tokens (passed as the NATS token, or as the password of any user).
//
// The all-access static token and tokens with the admin scope get the whole
// JetStream API and every subject but the hub's own (its inboxes and
// _EHAPI.>) and $SYS.>, as operators' nats CLI expects. Every other token
// connects (unless [Config.NativeScoped] is on) in a NATS account of its
// own (see principalAccounts) that imports from the hub's account only what
// its policy grants, and its policy also becomes the user's subject
// permissions in that account:
//
//   - publish rights on a topic cover its keyed subjects (<topic>._k.*) too,
//     and JetStream-acknowledged publishes work (acks arrive on the
//     account's own _INBOX.>);
//   - subscribe rights give live (core NATS) subscriptions on the topics,
//     exact for wildcard subscriptions too (see subscribePermissions);
//   - the JetStream API is granted by stream and consumer name for the
//     topics and groups the policy allows (see jetStreamGrants): stream
//     lookup, direct gets, and binding to the hub's groups as durable
//     consumers, so a native JetStream consumer bound to a group shares its
//     work with the hub's members; no consumer is created or deleted
//     natively; other system subjects ($KV.>, $SYS.>…) and the rest of the
//     JetStream API stay denied;
//   - an allow entry beginning with a wildcard ("**", "*.x") is expanded
//     over the first segments of the hub's topics (see expandLeading);
//   - a policy that permissions and imports cannot hold exactly (a "**"
//     that is not last, a deny that shadows a later allow, an entry naming
//     "$" or "_" subjects, entries that overlap without one covering the
//     other) is refused rather than approximated ("policy_not_expressible").
//
// Because every request a scoped client makes crosses an import, the
// server answers into the client's own account whatever reply subject it
// names, and no client sees another principal's replies.
//
// With [Config.NativeScoped] on, scoped clients share the hub's account
// instead, with subject permissions only: faster (no import to cross),
// without those two guarantees. There a bare "*" rule is refused, a rule
// beginning with a wildcard gets no JetStream API (NATS could not keep it
// out of $JS.>), and overlapping rules are accepted. On an external server the auth callout
// ([Callout]) cannot make accounts: there, scoped tokens share the account
// the callout places them in, and are refused unless NativeScoped is on.
//
// The hub's own inboxes use a private random prefix that is denied to
// everyone else. Every connection is closed when its token expires.
//
// The hub's own in-process connection presents [NATS.HubToken], a random
// secret made at start, and keeps full rights. Unauthenticated connections
// are refused.
type NATS struct {
	auth      *Authenticator
	dir       atomic.Pointer[directory]
	hubToken  string
	hubDigest token.Digest
	hubInbox  string
	accounts  principalAccounts
	log       *slog.Logger
	onFail    func(code string)
}

var _ server.Authentication = (*NATS)(nil)

// NewNATS returns the embedded server's authentication. onFail, if not nil,
// is called with a reason code for every refused connection (metrics).
func NewNATS(a *Authenticator, log *slog.Logger, onFail func(code string)) *NATS {
	var b, ib [32]byte
	_, _ = rand.Read(b[:])
	_, _ = rand.Read(ib[:8])
	tok := hex.EncodeToString(b[:])
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &NATS{
		auth: a, hubToken: tok, hubDigest: token.Of(tok),
		// The hub's replies and pulled messages arrive on inboxes no native
		// client can subscribe to (the shared _INBOX.> would expose them).
		// The prefix is seen by topic subscribers (the reply subject of the
		// hub's publishes): it is random, nothing of the hub's token.
		hubInbox: "_EHUB_" + hex.EncodeToString(ib[:8]),
		log:      log, onFail: onFail,
	}
}

type directory struct{ Directory }

// SetDirectory tells the authentication where topics live, for the
// JetStream API grants; until it is set (the bus is not open yet) native
// clients get none. Safe for concurrent use.
func (n *NATS) SetDirectory(d Directory) { n.dir.Store(&directory{d}) }

// SetServer tells the authentication which embedded server it guards, where
// it makes the accounts of scoped clients; until it is set they are
// refused ("starting"). Safe for concurrent use.
//
// It starts freeing the accounts of principals whose connections have all
// left, and closing the connections of an account that floods the hub with
// requests, until Close.
func (n *NATS) SetServer(s *server.Server) { n.accounts.setServer(s, n.log) }

// Close stops what SetServer started. A nil NATS, or closing twice, is not
// an error.
func (n *NATS) Close() {
	if n != nil {
		n.accounts.close()
	}
}

// Accounts returns the number of accounts the principals of scoped native
// clients hold, and of freed ones kept for the next principals (see
// principalAccounts).
func (n *NATS) Accounts() (held, idle int) { return n.accounts.inUse() }

// HubToken is the secret the hub's own connection authenticates with.
func (n *NATS) HubToken() string { return n.hubToken }

// HubInboxPrefix is the inbox prefix the hub's own connection must use
// (nats.CustomInboxPrefix): native clients are denied it.
func (n *NATS) HubInboxPrefix() string { return n.hubInbox }

// systemSubjects are never granted to native clients, whatever their policy
// says: the JetStream and KV APIs (consumer creation, acks, deletes), the
// system account, and other clients' inboxes.
var systemSubjects = []string{"$JS.>", "$JSC.>", "$KV.>", "$O.>", "$SYS.>", "$NRG.>", "$G.>"}

// systemEntry reports whether a policy entry names a subject outside the
// hub's topics: topics never begin with "$" or "_" (facade.ValidateTopic),
// so such a rule grants nothing over WebSocket or HTTP, and natively it
// would open system subjects ($JS.API…, _INBOX…) that the deny list then
// no longer covers.
func systemEntry(e string) bool { return strings.HasPrefix(e, "$") || strings.HasPrefix(e, "_") }

// Check implements server.Authentication.
func (n *NATS) Check(c server.ClientAuthentication) bool {
	opts := c.GetOpts()
	tok := opts.Token
	if tok == "" {
		tok = opts.Password
	}
	if tok == "" {
		n.refuse(c, "no_token")
		return false
	}
	if n.hubDigest.Matches(tok) {
		c.RegisterUser(&server.User{Username: "eventhub"})
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id, perms, plan, code := n.authorize(ctx, tok, !n.auth.nativeScoped)
	if code != "" {
		n.refuse(c, code)
		return false
	}
	user := &server.User{Username: id.Subject, Permissions: perms, ConnectionDeadline: id.Expires}
	if plan != nil {
		acc, release, err := n.accounts.account(*plan)
		if errors.Is(err, errNoServer) {
			n.refuse(c, "starting")
			return false
		}
		if err != nil {
			n.log.Error("native NATS client account", "err", err, "subject", id.Subject)
			n.refuse(c, "internal")
			return false
		}
		// The account is not freed before the connection has joined it.
		defer release()
		user.Account = acc
	}
	c.RegisterUser(user)
	return true
}

// authorize authenticates a native client's token and computes its subject
// permissions; code is a refusal reason ("" when accepted). The embedded
// server's Check and the auth callout service share it, so a token has the
// same rights on the embedded server and on an external one.
//
// A token without the admin scope is accepted only where it gets an account
// of its own (ownAccount, the embedded server), or where the operator
// accepted sharing one (Config.NativeScoped); plan is then what its own
// account imports (nil for an admin, and without ownAccount).
func (n *NATS) authorize(ctx context.Context, token string, ownAccount bool) (id *Identity, perms *server.Permissions, plan *importPlan, code string) {
	id, err := n.auth.Authenticate(ctx, token)
	if err != nil {
		return nil, nil, nil, codeOf(err)
	}
	hubInbox := n.hubInbox + ".>"
	if id.HasScope(ScopeAdmin) {
		deny := []string{hubInbox, apiPrefix + ">", "$SYS.>"}
		return id, &server.Permissions{
			Publish:   &server.SubjectPermission{Deny: deny},
			Subscribe: &server.SubjectPermission{Deny: slices.Clone(deny)},
		}, nil, ""
	}
	if !ownAccount && !n.auth.nativeScoped {
		return nil, nil, nil, "native_needs_admin"
	}
	pub, sub, ok := id.Policy.NATSPermissions()
	if !ok || slices.ContainsFunc(pub, systemEntry) || slices.ContainsFunc(sub, systemEntry) {
		return nil, nil, nil, "policy_not_expressible"
	}
	var dir Directory
	if d := n.dir.Load(); d != nil {
		dir = d.Directory
	}
	var account string
	if ownAccount {
		// An account is a principal's: tokens without a subject would share
		// one (and their inboxes) with every other such token of the policy.
		if !id.Static && id.Subject == "" {
			return nil, nil, nil, "no_subject"
		}
		principal := "jwt:" + id.Subject
		if id.Static {
			principal = "static:" + id.Subject
		}
		account = accountName(principal, pub, sub)
		if slices.ContainsFunc(pub, leadingWildcard) || slices.ContainsFunc(sub, leadingWildcard) {
			firsts, err := topicFirsts(ctx, dir)
			if err != nil {
				n.log.Warn("native NATS client refused: streams could not be listed", "err", err, "subject", id.Subject)
				return nil, nil, nil, "starting"
			}
			pub, sub = expandLeading(pub, firsts), expandLeading(sub, firsts)
		}
	}
	subAllow, subDeny, ok := subscribePermissions(sub)
	if !ok {
		return nil, nil, nil, "policy_not_expressible"
	}
	js, jsOK, err := jetStreamGrants(ctx, dir, id.Policy, pub, sub)
	if err != nil {
		// Refused rather than connected without the grants its policy gives.
		n.log.Warn("native NATS client refused: streams could not be listed", "err", err, "subject", id.Subject)
		return nil, nil, nil, "starting"
	}
	pubDeny := append(slices.Clone(systemSubjects), "_INBOX.>", hubInbox, apiPrefix+">")
	if jsOK {
		// The allow list names every JetStream subject granted; nothing
		// else under $JS is in it (no entry begins with a wildcard).
		pubDeny = slices.DeleteFunc(pubDeny, func(s string) bool { return s == "$JS.>" })
	}
	pubAllow := append(withKeyed(pub), js...)
	if ownAccount {
		p, ok := planImports(pubAllow, subAllow)
		if !ok {
			return nil, nil, nil, "policy_not_expressible"
		}
		p.account = account
		for _, e := range append(slices.Clone(pub), sub...) {
			if t, _, _ := strings.Cut(e, " "); !slices.Contains(p.topics, t) {
				p.topics = append(p.topics, t)
			}
		}
		plan = &p
	}
	return id, &server.Permissions{
		Publish: &server.SubjectPermission{
			Allow: pubAllow,
			Deny:  pubDeny,
		},
		Subscribe: &server.SubjectPermission{
			Allow: append(subAllow, "_INBOX.>"),
			Deny:  append(append(slices.Clone(systemSubjects), hubInbox, apiPrefix+">"), subDeny...),
		},
	}, plan, ""
}

func (n *NATS) refuse(c server.ClientAuthentication, code string) {
	n.log.Info("native NATS connection refused", "code", code, "remote", addr(c))
	if n.onFail != nil {
		n.onFail(code)
	}
}

func addr(c server.ClientAuthentication) string {
	if a := c.RemoteAddress(); a != nil {
		return a.String()
	}
	return "in-process"
}

// withKeyed adds the keyed subjects of every topic subject: "a.b" gains
// "a.b._k.*"; subjects ending in ">" already cover them. Entries may carry a
// queue group after a space ("subject group").
func withKeyed(subjects []string) []string {
	out := make([]string, 0, 2*len(subjects))
	for _, s := range subjects {
		out = append(out, s)
		subj, queue, hasQueue := strings.Cut(s, " ")
		if subj == ">" || strings.HasSuffix(subj, ".>") {
			continue
		}
		k := subj + "._k.*"
		if hasQueue {
			k += " " + queue
		}
		out = append(out, k)
	}
	return out
}

// subscribePermissions turns the policy's subscribe allow list (topic
// subjects, each with an optional " queue" suffix) into NATS allow and deny
// lists that grant a native client exactly the events its policy grants,
// for every subscription it can make, wildcards included.
//
// NATS checks a subscription's subject against the allow list token by
// token, so a "*" in the list also accepts a ">" in that place: "orders.*"
// lets a client subscribe to "orders.>", which reaches "orders.a.b.c",
// dead-letter topics ("orders.x.dlq") and keyed subjects. The deny list
// closes that: NATS refuses subscriptions that match it and, for wildcard
// subscriptions that overlap it, drops each denied message at delivery.
//
//   - a topic subject ending in a literal ("orders.new") also grants its
//     keyed subjects ("orders.new._k.*"), and denies what lies below a key
//     ("orders.new._k.*.>", never an event);
//   - a subject ending in "*" ("orders.*") denies everything below it
//     ("orders.*.*" and "orders.*.*.>"). Keyed subjects of those topics
//     lie below it too and NATS cannot tell them from deeper topics, so
//     such a rule gives native clients the topics' unkeyed events only
//     (the WebSocket and HTTP ways in deliver keyed events as well); a rule
//     naming the topic, or ending in "**", gives them natively;
//   - a subject ending in ">" already means what the rule means.
//
// A deny entry that some unrestricted allow entry covers whole is left out
// (it would only take back what another rule grants). ok is false when the
// lists cannot be exact: a rule "*" alone, whose deny list would cover the
// clients' own reply inboxes.
func subscribePermissions(subs []string) (allow, deny []string, ok bool) {
	allow = make([]string, 0, 2*len(subs))
	add := func(list []string, s string) []string {
		if !slices.Contains(list, s) {
			list = append(list, s)
		}
		return list
	}
	for _, e := range subs {
		subj, queue, hasQueue := strings.Cut(e, " ")
		allow = add(allow, e)
		switch last := subj[strings.LastIndexByte(subj, '.')+1:]; last {
		case ">":
		case "*":
			if subj == "*" {
				return nil, nil, false
			}
			deny = add(deny, subj+".*")
			deny = add(deny, subj+".*.>")
		default:
			k := subj + "._k.*"
			if hasQueue {
				allow = add(allow, k+" "+queue)
			} else {
				allow = add(allow, k)
			}
			deny = add(deny, k+".>")
		}
	}
	kept := deny[:0]
	for _, d := range deny {
		covered := false
		for _, a := range allow {
			if !strings.Contains(a, " ") && subjectCovers(a, d) {
				covered = true
				break
			}
		}
		if !covered {
			kept = append(kept, d)
		}
	}
	return allow, kept, true
}

// subjectCovers reports whether every subject that s matches is matched by
// a (NATS subject wildcards: "*" one token, ">" one or more at the end).
func subjectCovers(a, s string) bool {
	at, st := strings.Split(a, "."), strings.Split(s, ".")
	for i, t := range at {
		if t == ">" {
			return len(st) > i
		}
		if i >= len(st) {
			return false
		}
		switch {
		case t == "*":
			if st[i] == ">" {
				return false
			}
		case t != st[i]:
			return false
		}
	}
	return len(at) == len(st)
}

// codeOf returns the code of a token error, or "bad_token".
func codeOf(err error) string {
	if e, ok := errors.AsType[*facade.Error](err); ok {
		return e.Code
	}
	return "bad_token"
}
