// Package auth checks bearer tokens with scopes for the HTTP API.
//
// A token file has one token a line, `TOKEN SCOPE[,SCOPE…] [NAME]`, with
// blank lines and `#` comments; scopes are write (POST /v1/…), read (GET
// /v1/…, /metrics) and admin (/admin/…; it implies read). Tokens are kept
// only as SHA-256 digests and looked up by digest, so a check takes the
// same time whichever bytes of a wrong token match; a token never appears
// in a log line, an error or a String. A Keeper holds the current set and
// reloads it from its file (on SIGHUP); a file that does not parse is
// refused and the set stays as it was.
//
// Policy decides at start whether a listener runs open: with no token
// file, only on a loopback address (and it says so), or anywhere with
// `auth: none` set explicitly; a token file makes every /v1 and /admin
// route need a token.
package auth
