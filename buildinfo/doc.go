// Package buildinfo says which build of edgecount a process is: its
// version, the VCS revision it was built from and whether that tree had
// uncommitted changes, when the revision was committed, the Go version
// and the platform. Read takes them from the binary itself
// (runtime/debug.ReadBuildInfo), where the go command records them; a
// release build may set the version at link time instead:
//
//	go build -ldflags "-X github.com/edgecount/edgecount/buildinfo.version=v1.2.3" ./cmd/edge-agent
//
// A version is a tag: printable ASCII without spaces, at most 64 bytes (an
// agent tells it to its gossip peers, which refuse anything else).
//
// The commands print Info.Line on --version, and package metrics exports
// it as edgecount_build_info. What is not recorded (a test binary, a build
// with -buildvcs=false or in a linked git worktree, which the go command
// does not stamp: golang/go#58218) reads as Unknown rather than as a
// guess.
//
// Read's result never changes within a process; Read and Info's methods
// are safe for concurrent use.
package buildinfo
