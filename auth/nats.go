package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/eventhub/eventhub/acl"
)

// NATS authenticates native NATS clients of the embedded server with the
// hub's tokens (passed as the NATS token, or as the password of any user) and
// turns their policy into NATS subject permissions, so they cannot bypass the
// ACL:
//
//   - publish rights on a topic cover its keyed subjects (<topic>._k.*) too,
//     and JetStream-acknowledged publishes work (acks arrive on _INBOX.>);
//   - subscribe rights give live (core NATS) subscriptions on the topics;
//   - the JetStream API and other system subjects ($JS.>, $KV.>, $SYS.>…)
//     are denied even to wildcard policies: durable consumption of topics
//     goes through the hub (WebSocket or the Go client), where groups are
//     checked too;
//   - the hub's own inboxes use a private random prefix that is denied to
//     everyone else; native clients share _INBOX.> for their replies, so
//     they can see each other's JetStream publish acks (not events);
//   - a policy NATS cannot express (a "**" that is not last, a deny that
//     shadows a later allow) is refused rather than approximated;
//   - the connection is closed when the token expires.
//
// The hub's own in-process connection presents [NATS.HubToken], a random
// secret made at start, and keeps full rights. Unauthenticated connections
// are refused.
type NATS struct {
	auth      *Authenticator
	hubToken  string
	hubDigest [32]byte
	hubInbox  string
	log       *slog.Logger
	onFail    func(code string)
}

var _ server.Authentication = (*NATS)(nil)

// NewNATS returns the embedded server's authentication. onFail, if not nil,
// is called with a reason code for every refused connection (metrics).
func NewNATS(a *Authenticator, log *slog.Logger, onFail func(code string)) *NATS {
	var b [32]byte
	_, _ = rand.Read(b[:])
	tok := hex.EncodeToString(b[:])
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &NATS{
		auth: a, hubToken: tok, hubDigest: sha256.Sum256([]byte(tok)),
		// The hub's replies and pulled messages arrive on inboxes no native
		// client can subscribe to (the shared _INBOX.> would expose them).
		hubInbox: "_EHUB_" + tok[:16],
		log:      log, onFail: onFail,
	}
}

// HubToken is the secret the hub's own connection authenticates with.
func (n *NATS) HubToken() string { return n.hubToken }

// HubInboxPrefix is the inbox prefix the hub's own connection must use
// (nats.CustomInboxPrefix): native clients are denied it.
func (n *NATS) HubInboxPrefix() string { return n.hubInbox }

// systemSubjects are never granted to native clients, whatever their policy
// says: the JetStream and KV APIs (consumer creation, acks, deletes), the
// system account, and other clients' inboxes.
var systemSubjects = []string{"$JS.>", "$JSC.>", "$KV.>", "$O.>", "$SYS.>", "$NRG.>", "$G.>"}

// Check implements server.Authentication.
func (n *NATS) Check(c server.ClientAuthentication) bool {
	opts := c.GetOpts()
	token := opts.Token
	if token == "" {
		token = opts.Password
	}
	if token == "" {
		n.refuse(c, "no_token")
		return false
	}
	d := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(d[:], n.hubDigest[:]) == 1 {
		c.RegisterUser(&server.User{Username: "eventhub"})
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id, err := n.auth.Authenticate(ctx, token)
	if err != nil {
		n.refuse(c, codeOf(err))
		return false
	}
	pub, sub, ok := id.Policy.NATSPermissions()
	if !ok {
		n.refuse(c, "policy_not_expressible")
		return false
	}
	hubInbox := n.hubInbox + ".>"
	c.RegisterUser(&server.User{
		Username: id.Subject,
		Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{
				Allow: withKeyed(pub),
				Deny:  append(slices.Clone(systemSubjects), "_INBOX.>", hubInbox),
			},
			Subscribe: &server.SubjectPermission{
				Allow: append(withKeyed(sub), "_INBOX.>"),
				Deny:  append(slices.Clone(systemSubjects), hubInbox),
			},
		},
		ConnectionDeadline: id.Expires,
	})
	return true
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

// codeOf returns the wire code of an acl error, or "bad_token".
func codeOf(err error) string {
	if e, ok := errors.AsType[*acl.Error](err); ok {
		return e.Code
	}
	return "bad_token"
}
