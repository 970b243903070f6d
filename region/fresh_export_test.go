package region

// Flush runs one flush now (tests of fresh reads step through a delta's
// life: held, flushed, acknowledged, applied).
func (a *Agent) Flush() { a.flusher.flush(false) }
