package testenv

import "go.uber.org/goleak"

// FasthttpDate is the goleak option that tolerates the one goroutine
// fasthttp starts with a process's first answer and never ends: it renders
// the Date header once a second (httpapi.NewServer leaves fasthttp to date
// its answers). A TestMain of a package whose tests run an httpapi.Server
// passes it to goleak.VerifyTestMain.
var FasthttpDate = goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1")
