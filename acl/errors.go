package acl

// Error is the single error type returned by this package for token,
// pattern, policy and configuration failures. Code is a short, stable,
// machine-readable identifier (suitable for a WebSocket close reason or a
// JSON error body); Msg is a human-readable description. Neither ever
// contains the token or a secret.
//
// Two *Error values are considered equal by errors.Is when their codes are
// equal, so callers test for a failure class with the exported sentinels:
//
//	if errors.Is(err, acl.ErrTokenExpired) { ... }
//
// An *Error may wrap an underlying cause (for example a
// github.com/golang-jwt/jwt/v5 error); it is reachable with errors.Unwrap and
// errors.As, and is appended to Error() for logs.
type Error struct {
	// Code is the stable machine-readable error code, e.g. "token_expired".
	Code string
	// Msg is a short human-readable description.
	Msg string

	cause error
}

// Error implements the error interface. The result is "acl: <msg>" followed
// by ": <cause>" when the error wraps a cause.
func (e *Error) Error() string {
	s := "acl: " + e.Msg
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

// Unwrap returns the wrapped cause, or nil.
func (e *Error) Unwrap() error { return e.cause }

// Is reports whether target is an *Error with the same Code. It lets
// errors.Is match any error of a class against its sentinel.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t != nil && t.Code == e.Code
}

// wrap returns a new *Error of the same class as e (same Code and Msg)
// wrapping cause. The sentinel itself is never modified.
func (e *Error) wrap(cause error) *Error {
	return &Error{Code: e.Code, Msg: e.Msg, cause: cause}
}

// withMsg returns a new *Error of the same class as e with a more specific
// message and an optional cause.
func (e *Error) withMsg(msg string, cause error) *Error {
	return &Error{Code: e.Code, Msg: msg, cause: cause}
}

// Sentinel errors. Compare with errors.Is; never compare with == because
// returned errors are distinct values carrying more context.
var (
	// ErrTokenMissing means no token was presented (empty string).
	ErrTokenMissing = &Error{Code: "no_token", Msg: "token missing"}
	// ErrTokenMalformed means the token is not a well-formed JWT (wrong number of
	// segments, bad base64, bad JSON, oversized, wrong claim types).
	ErrTokenMalformed = &Error{Code: "bad_token", Msg: "token malformed"}
	// ErrTokenExpired means the exp claim is in the past (beyond the leeway).
	ErrTokenExpired = &Error{Code: "token_expired", Msg: "token expired"}
	// ErrTokenNotYetValid means the nbf or iat claim is in the future (beyond the
	// leeway).
	ErrTokenNotYetValid = &Error{Code: "token_not_valid_yet", Msg: "token not valid yet"}
	// ErrBadSignature means the signature does not verify with the selected key.
	ErrBadSignature = &Error{Code: "bad_signature", Msg: "token signature invalid"}
	// ErrBadAlgorithm means the token's alg header is missing, unknown, "none",
	// not in the verifier's allowed list, or has no key source configured.
	ErrBadAlgorithm = &Error{Code: "bad_algorithm", Msg: "token signing algorithm not accepted"}
	// ErrBadAudience means an audience is configured and the token's aud claim is
	// missing or does not contain it.
	ErrBadAudience = &Error{Code: "bad_audience", Msg: "token audience not accepted"}
	// ErrBadIssuer means an issuer is configured and the token's iss claim is
	// missing or different.
	ErrBadIssuer = &Error{Code: "bad_issuer", Msg: "token issuer not accepted"}
	// ErrMissingExp means the token has no exp claim; tokens must expire.
	ErrMissingExp = &Error{Code: "missing_exp", Msg: "token has no expiry"}
	// ErrUnknownKey means no JWKS key matches the token's kid (after a
	// rate-limited refresh) or the key's type does not fit the algorithm.
	ErrUnknownKey = &Error{Code: "unknown_key", Msg: "token signing key unknown"}
	// ErrBadPolicy means a Policy (or the policy/scopes carried by a token) is
	// invalid: unknown effect or action, rule without topics, bad pattern or
	// bad scope. A token carrying an invalid policy is rejected with this
	// code (fail closed).
	ErrBadPolicy = &Error{Code: "bad_policy", Msg: "invalid policy"}
	// ErrBadPattern means a topic pattern is invalid (empty, empty segment, a
	// segment mixing '*' with other characters such as "a*" or "***", a ">"
	// segment, whitespace or control characters).
	ErrBadPattern = &Error{Code: "bad_pattern", Msg: "invalid topic pattern"}
	// ErrBadScope means a scope string is not of the form "<action>:<pattern>".
	ErrBadScope = &Error{Code: "bad_scope", Msg: "invalid scope"}
	// ErrJWKSUnavailable means NewVerifier could not fetch or parse the
	// JWKS at start-up.
	ErrJWKSUnavailable = &Error{Code: "jwks_unavailable", Msg: "JWKS unavailable"}
	// ErrBadConfig means a VerifierConfig is invalid, or minting parameters are.
	ErrBadConfig = &Error{Code: "bad_config", Msg: "invalid configuration"}
)
