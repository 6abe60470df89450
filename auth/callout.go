package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// CalloutSubject is where nats-server (2.10+) sends authorization requests
// to an auth callout service.
const CalloutSubject = "$SYS.REQ.USER.AUTH"

// Callout is the hub as the NATS auth callout service of an external server
// or cluster: it answers each authorization request with the permissions
// the client's token (its auth_token, or its password) gives on the
// embedded server, signed with the issuer account's key that the servers'
// auth_callout block names. Users of the servers' own config (auth_users,
// the hub's own user) bypass it. See deploy/nats/callout.conf.
type Callout struct {
	n   *NATS
	kp  nkeys.KeyPair
	sub *nats.Subscription
}

// ErrCalloutSeed is returned for an issuer seed that is not an account seed.
var ErrCalloutSeed = errors.New("auth: the auth callout issuer must be an account nkey seed (SA…)")

// NewCallout returns the callout service; seed is the issuer account's
// nkey seed. It does nothing until [Callout.Start].
func NewCallout(n *NATS, seed string) (*Callout, error) {
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(seed)))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCalloutSeed, err)
	}
	pub, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicAccountKey(pub) {
		return nil, ErrCalloutSeed
	}
	return &Callout{n: n, kp: kp}, nil
}

// Issuer is the public account key the servers' auth_callout issuer must be.
func (c *Callout) Issuer() string {
	pub, _ := c.kp.PublicKey()
	return pub
}

// Start answers authorization requests arriving on nc (a connection of an
// auth_users user) until Close. Several hubs may run it: they share the
// requests as a queue group.
func (c *Callout) Start(nc *nats.Conn) error {
	sub, err := nc.QueueSubscribe(CalloutSubject, "eventhub-auth-callout", c.handle)
	if err != nil {
		return fmt.Errorf("auth callout: subscribe: %w", err)
	}
	c.sub = sub
	return nc.Flush()
}

// Close stops answering; requests in progress finish.
func (c *Callout) Close() error {
	if c.sub == nil {
		return nil
	}
	return c.sub.Drain()
}

func (c *Callout) handle(m *nats.Msg) {
	req, err := jwt.DecodeAuthorizationRequestClaims(string(m.Data))
	if err != nil {
		c.n.log.Warn("auth callout: undecodable request", "err", err)
		return
	}
	token := req.ConnectOptions.Token
	if token == "" {
		token = req.ConnectOptions.Password
	}
	respond := func(userJWT, errMsg string) {
		rc := jwt.NewAuthorizationResponseClaims(req.UserNkey)
		rc.Audience = req.Server.ID
		rc.Jwt, rc.Error = userJWT, errMsg
		out, err := rc.Encode(c.kp)
		if err != nil {
			c.n.log.Error("auth callout: sign response", "err", err)
			return
		}
		_ = m.Respond([]byte(out))
	}
	refuse := func(code string) {
		c.n.log.Info("native NATS connection refused", "code", code, "remote", req.ClientInformation.Host, "via", "auth_callout")
		if c.n.onFail != nil {
			c.n.onFail(code)
		}
		respond("", code)
	}
	if token == "" {
		refuse("no_token")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id, perms, _, code := c.n.authorize(ctx, token, false)
	if code != "" {
		refuse(code)
		return
	}
	uc := jwt.NewUserClaims(req.UserNkey)
	uc.Name = id.Subject
	uc.Audience = "$G" // the global account (servers without operator mode)
	if !id.Expires.IsZero() {
		uc.Expires = id.Expires.Unix()
	}
	uc.Pub = jwtPermission(perms.Publish)
	uc.Sub = jwtPermission(perms.Subscribe)
	ujwt, err := uc.Encode(c.kp)
	if err != nil {
		c.n.log.Error("auth callout: sign user", "err", err)
		refuse("internal")
		return
	}
	respond(ujwt, "")
}

// jwtPermission turns a server permission into a user JWT's. A JWT cannot
// say "allow nothing" with an empty allow list (that means no limit), so
// an empty one becomes a deny of everything.
func jwtPermission(p *server.SubjectPermission) jwt.Permission {
	var out jwt.Permission
	if p == nil {
		return out
	}
	if p.Allow != nil && len(p.Allow) == 0 {
		out.Deny.Add(">")
		return out
	}
	out.Allow.Add(p.Allow...)
	out.Deny.Add(p.Deny...)
	return out
}
