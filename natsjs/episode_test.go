package natsjs

import (
	"slices"
	"testing"
)

func TestEpisodeLogsFewLinesAndTheRecovery(t *testing.T) {
	var e episode
	if _, _, ended := e.end(); ended {
		t.Fatal("a success without failures ended an episode")
	}
	var logged []int
	for range 10 {
		if n, log := e.fail(); log {
			logged = append(logged, n)
		}
	}
	if got, want := logged, []int{1, 2, 4, 8}; !slices.Equal(got, want) {
		t.Errorf("logged failures %v of 10, want %v", got, want)
	}
	if n, d, ended := e.end(); !ended || n != 10 || d < 0 {
		t.Errorf("end() = %d, %v, %v; want 10 failures, a duration, true", n, d, ended)
	}
	if n, log := e.fail(); n != 1 || !log {
		t.Errorf("first failure of a new episode: %d, %v; want 1, true", n, log)
	}
}
