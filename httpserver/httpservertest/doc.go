// Package httpservertest runs an httpserver.Server in a test, as
// net/http/httptest runs net/http's: Serve and Start serve a handler on a
// loopback port until the test ends, then shut the server down and fail
// the test unless it stopped cleanly; Via turns a handler into one whose
// every request crosses a real connection to such a server, so that tests
// written against handlers drive the server path; CheckDate checks the
// Date header every answer carries.
//
// Every function takes the test and ties what it starts to the test's
// cleanup: nothing outlives the test. The handler Via returns sends one
// request at a time over its connection and is safe for concurrent use.
package httpservertest
