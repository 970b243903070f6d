package testenv

import "go.uber.org/goleak"

// FasthttpDate is the goleak option that tolerates the one goroutine
// fasthttp starts with a process's first answer and never ends: it renders
// the Date header once a second (httpserver.New leaves fasthttp to date
// its answers). A TestMain of a package whose tests run an
// httpserver.Server passes it to goleak.VerifyTestMain.
var FasthttpDate = goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1")
