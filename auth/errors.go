package auth

import (
	"fmt"

	"github.com/eventhub/eventhub/facade"
)

// Sentinel errors of token verification. They are *facade.Error values,
// the one coded error type of eventhub: errors.Is matches by code, so test
// with the sentinels and never with ==, since returned errors wrap them
// with more context (a github.com/golang-jwt/jwt/v5 cause stays reachable
// with errors.As). Error texts never contain the token or a secret.
var (
	// ErrTokenMissing means no token was presented (empty string).
	ErrTokenMissing = &facade.Error{Code: "no_token", Msg: "token missing"}
	// ErrTokenMalformed means the token is not a well-formed JWT (wrong number of
	// segments, bad base64, bad JSON, oversized, wrong claim types).
	ErrTokenMalformed = &facade.Error{Code: "bad_token", Msg: "token malformed"}
	// ErrTokenExpired means the exp claim is in the past (beyond the leeway).
	ErrTokenExpired = &facade.Error{Code: "token_expired", Msg: "token expired"}
	// ErrTokenNotYetValid means the nbf or iat claim is in the future (beyond the
	// leeway).
	ErrTokenNotYetValid = &facade.Error{Code: "token_not_valid_yet", Msg: "token not valid yet"}
	// ErrBadSignature means the signature does not verify with the selected key.
	ErrBadSignature = &facade.Error{Code: "bad_signature", Msg: "token signature invalid"}
	// ErrBadAlgorithm means the token's alg header is missing, unknown, "none",
	// not in the verifier's allowed list, or has no key source configured.
	ErrBadAlgorithm = &facade.Error{Code: "bad_algorithm", Msg: "token signing algorithm not accepted"}
	// ErrBadAudience means an audience is configured and the token's aud claim is
	// missing or does not contain it.
	ErrBadAudience = &facade.Error{Code: "bad_audience", Msg: "token audience not accepted"}
	// ErrBadIssuer means an issuer is configured and the token's iss claim is
	// missing or different.
	ErrBadIssuer = &facade.Error{Code: "bad_issuer", Msg: "token issuer not accepted"}
	// ErrMissingExp means the token has no exp claim; tokens must expire.
	ErrMissingExp = &facade.Error{Code: "missing_exp", Msg: "token has no expiry"}
	// ErrUnknownKey means no JWKS key matches the token's kid (after a
	// rate-limited refresh) or the key's type does not fit the algorithm.
	ErrUnknownKey = &facade.Error{Code: "unknown_key", Msg: "token signing key unknown"}
	// ErrJWKSUnavailable means NewVerifier could not fetch or parse the
	// JWKS at start-up.
	ErrJWKSUnavailable = &facade.Error{Code: "jwks_unavailable", Msg: "JWKS unavailable"}
	// ErrBadConfig means a VerifierConfig is invalid, or minting parameters are.
	ErrBadConfig = &facade.Error{Code: "bad_config", Msg: "invalid configuration"}
)

// wrapErr returns an error matching sentinel that wraps cause (nil: none).
func wrapErr(sentinel *facade.Error, cause error) error {
	if cause == nil {
		return sentinel
	}
	return fmt.Errorf("%w: %w", sentinel, cause)
}

// errMsg returns an error matching sentinel, with a more specific message
// and an optional cause.
func errMsg(sentinel *facade.Error, msg string, cause error) error {
	if cause == nil {
		return fmt.Errorf("%w: %s", sentinel, msg)
	}
	return fmt.Errorf("%w: %s: %w", sentinel, msg, cause)
}
