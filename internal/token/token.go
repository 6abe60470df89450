// Package token is the one comparison of a presented token with a
// configured one (the static token, the hub's own NATS token), used by every
// way in.
package token

import (
	"crypto/sha256"
	"crypto/subtle"
)

// Digest is the SHA-256 of a configured token. Comparing digests takes the
// same time whatever the tokens' contents and lengths, and the configured
// token itself need not be kept.
type Digest [32]byte

// Of returns the digest of token.
func Of(token string) Digest { return sha256.Sum256([]byte(token)) }

// Matches reports whether got is the token d was made of, in constant time.
func (d Digest) Matches(got string) bool {
	h := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(h[:], d[:]) == 1
}
