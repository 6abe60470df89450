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

	"github.com/eventhub/eventhub/auth/natsgrant"
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
//     exact for wildcard subscriptions too (see natsgrant.Compile); rules
//     restricted to groups give no live subscriptions, only the groups;
//   - the JetStream API is granted by stream and consumer name for the
//     topics and groups the policy allows (see natsgrant.Compile): stream
//     lookup, direct gets, and binding to the hub's groups as durable
//     consumers, so a native JetStream consumer bound to a group shares its
//     work with the hub's members; no consumer is created or deleted
//     natively; other system subjects ($KV.>, $SYS.>…) and the rest of the
//     JetStream API stay denied;
//   - an allow entry beginning with a wildcard ("**", "*.x") is expanded
//     over the first segments of the hub's topics (see natsgrant.Input);
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
	// The policy's own entries, before expansion, name its account.
	pub, sub, err := natsgrant.Topics(natsgrant.Input{Policy: id.Policy})
	if err != nil {
		return nil, nil, nil, "policy_not_expressible"
	}
	in := natsgrant.Input{Policy: id.Policy, OwnAccount: ownAccount, Reserved: []string{hubInbox, apiPrefix + ">"}}
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
	}
	if d := n.dir.Load(); d != nil {
		var err error
		if in.Catalogue, err = catalogue(ctx, d.Directory, ownAccount, pub, sub); err != nil {
			// Refused rather than connected without the grants its policy
			// gives.
			n.log.Warn("native NATS client refused: streams could not be listed", "err", err, "subject", id.Subject)
			return nil, nil, nil, "starting"
		}
	}
	g, err := natsgrant.Compile(in)
	if err != nil {
		return nil, nil, nil, "policy_not_expressible"
	}
	if ownAccount {
		p := importPlan{account: account, services: g.Services, streams: g.Streams}
		for _, e := range slices.Concat(g.PublishTopics, g.SubscribeTopics) {
			if t, _, _ := strings.Cut(e, " "); !slices.Contains(p.topics, t) {
				p.topics = append(p.topics, t)
			}
		}
		plan = &p
	}
	return id, &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: g.Publish.Allow, Deny: g.Publish.Deny},
		Subscribe: &server.SubjectPermission{Allow: g.Subscribe.Allow, Deny: g.Subscribe.Deny},
	}, plan, ""
}

// catalogue takes the snapshot of the streams that a policy with topic
// entries pub and sub (" group" suffixes allowed) needs: every stream, with
// its groups, when an own account expands an entry beginning with a
// wildcard; otherwise the streams of each entry, with their groups for
// subscribe entries. On error the snapshot is not Listed.
func catalogue(ctx context.Context, dir Directory, ownAccount bool, pub, sub []string) (natsgrant.Catalogue, error) {
	cat := natsgrant.Catalogue{StreamFor: dir.StreamNameFor, ConsumerName: dir.ConsumerName}
	if ownAccount && (slices.ContainsFunc(pub, natsgrant.LeadingWildcard) || slices.ContainsFunc(sub, natsgrant.LeadingWildcard)) {
		all, err := dir.TopicStreams(ctx, ">", true)
		if err != nil {
			return cat, err
		}
		cat.Streams, cat.Listed = all, true
		return cat, nil
	}
	read := map[string]bool{}
	var filters []string
	for i, e := range slices.Concat(pub, sub) {
		f, _, _ := strings.Cut(e, " ")
		if natsgrant.LeadingWildcard(f) {
			continue
		}
		if !slices.Contains(filters, f) {
			filters = append(filters, f)
		}
		read[f] = read[f] || i >= len(pub)
	}
	for _, f := range filters {
		found, err := dir.TopicStreams(ctx, f, read[f])
		if err != nil {
			return natsgrant.Catalogue{}, err
		}
		for _, s := range found {
			switch i := slices.IndexFunc(cat.Streams, func(o Stream) bool { return o.Name == s.Name }); {
			case i < 0:
				cat.Streams = append(cat.Streams, s)
			case cat.Streams[i].Groups == nil:
				// found again by a subscribe entry, with its groups
				cat.Streams[i].Groups = s.Groups
			}
		}
	}
	cat.Listed = true
	return cat, nil
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

// codeOf returns the code of a token error, or "bad_token".
func codeOf(err error) string {
	if e, ok := errors.AsType[*facade.Error](err); ok {
		return e.Code
	}
	return "bad_token"
}
