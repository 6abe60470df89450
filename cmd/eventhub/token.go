package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/eventhub/eventhub/auth"
)

// token mints a development HS256 token with the given scopes, signed with
// JWT_SECRET, for development.
func token(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eventhub token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := newFlags(fs, getenv)
	var secret, scopes, subject, aud, iss string
	var ttl time.Duration
	f.secret(&secret, "secret", "JWT_SECRET", "", "HS256 secret, at least 32 bytes")
	fs.StringVar(&scopes, "scopes", "", "comma-separated scopes: topic scopes such as publish:heartbeat.*,subscribe:process.**, and admin or metrics for the operator endpoints")
	fs.StringVar(&subject, "sub", "dev", "the token's subject")
	f.str(&aud, "aud", "JWT_AUD", "", "audience")
	f.str(&iss, "iss", "JWT_ISS", "", "issuer")
	fs.DurationVar(&ttl, "ttl", time.Hour, "lifetime")
	if err := f.parse(args); err != nil {
		return err
	}
	if secret == "" {
		return fmt.Errorf("token: set JWT_SECRET (or -secret) to the secret the hub verifies with")
	}
	var list []string
	for s := range strings.SplitSeq(scopes, ",") {
		if s = strings.TrimSpace(s); s != "" {
			list = append(list, s)
		}
	}
	if len(list) == 0 {
		return fmt.Errorf("token: -scopes is required (a token without scopes may do nothing)")
	}
	tok, err := auth.MintHS256([]byte(secret), auth.MintClaims{Subject: subject, Scopes: list, Audience: aud, Issuer: iss, TTL: ttl}, time.Now())
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	fmt.Fprintln(stdout, tok)
	return nil
}
