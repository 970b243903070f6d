//go:build race

package topk

// raceEnabled: the race detector's build does not elide the temporary of
// append(s, make([]T, n)...), so allocation sizes differ from a normal
// build.
const raceEnabled = true
