package natsjs

import "time"

// episode follows one kind of failure that repeats until the broker comes
// back (a lost stream, a membership that cannot be renewed): it says which
// failures to log, so that a long outage logs a handful of lines instead of
// one per attempt, and reports the recovery once. The zero value is a
// healthy state. It is not safe for concurrent use.
type episode struct {
	failures int
	since    time.Time
}

// fail records a failure and returns its number in the episode and
// whether to log it: the first, then the 2nd, 4th, 8th, …
func (e *episode) fail() (n int, log bool) {
	if e.failures == 0 {
		e.since = time.Now()
	}
	e.failures++
	return e.failures, logAttempt(e.failures)
}

// end records a success. When it ends an episode it returns the number of
// failures, how long the episode lasted and true.
func (e *episode) end() (failures int, lasted time.Duration, ended bool) {
	if e.failures == 0 {
		return 0, 0, false
	}
	failures, lasted = e.failures, time.Since(e.since)
	*e = episode{}
	return failures, lasted, true
}
