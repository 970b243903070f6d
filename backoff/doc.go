// Package backoff is the wait between attempts of something that fails and
// is tried again: an exponential delay with a cap, and a sleep that ends
// early when its context does. It imports only the standard library, so
// every package may use it; it is safe for concurrent use (it keeps no
// state).
package backoff
