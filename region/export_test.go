package region

// Crash abandons the agent as a SIGKILL would, for tests that reopen its
// data directory in the same process: its loops stop without a final
// flush, nothing more is published, and its logs are closed (releasing
// their directory locks) without the agent's counters being written
// anywhere. Stop afterwards does nothing.
func (a *Agent) Crash() {
	a.stopOnce.Do(func() {
		a.stopping.Store(true)
		a.startOnce.Do(func() {})
		if a.hotCancel != nil {
			a.hotCancel()
			a.hotWG.Wait()
		}
		f := a.flusher
		select {
		case <-f.stopFlush:
		default:
			close(f.stopFlush)
		}
		f.pubCancel()
		f.wg.Wait()
		if a.log != nil {
			a.log.close()
		}
	})
}
