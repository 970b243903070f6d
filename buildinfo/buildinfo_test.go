package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestFrom(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/edgecount/edgecount", Version: "v0.0.0-20261206100000-0123456789ab+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "-buildmode", Value: "exe"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2026-12-06T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	platform := " platform=" + runtime.GOOS + "/" + runtime.GOARCH
	tests := []struct {
		name     string
		bi       *debug.BuildInfo
		override string
		want     Info
		line     string
	}{
		{
			name: "stamped by go build",
			bi:   stamped,
			want: Info{Version: "v0.0.0-20261206100000-0123456789ab+dirty", Revision: rev, Modified: true,
				Time: time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC), GoVersion: "go1.26.8", OS: runtime.GOOS, Arch: runtime.GOARCH},
			line: "edge-agent version=v0.0.0-20261206100000-0123456789ab+dirty revision=0123456789ab modified=true time=2026-12-06T10:00:00Z go=go1.26.8" + platform,
		},
		{
			name:     "version set at link time",
			bi:       stamped,
			override: "v1.2.3",
			want: Info{Version: "v1.2.3", Revision: rev, Modified: true,
				Time: time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC), GoVersion: "go1.26.8", OS: runtime.GOOS, Arch: runtime.GOARCH},
			line: "edge-agent version=v1.2.3 revision=0123456789ab modified=true time=2026-12-06T10:00:00Z go=go1.26.8" + platform,
		},
		{
			name: "no VCS stamp (go test, -buildvcs=false)",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/edgecount/edgecount", Version: "(devel)"}},
			want: Info{Version: "(devel)", Revision: Unknown, GoVersion: "go1.26.8", OS: runtime.GOOS, Arch: runtime.GOARCH},
			line: "edge-agent version=(devel) revision=unknown modified=unknown time=unknown go=go1.26.8" + platform,
		},
		{
			name: "no build information at all",
			want: Info{Version: Unknown, Revision: Unknown, GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH},
			line: "edge-agent version=unknown revision=unknown modified=unknown time=unknown go=" + runtime.Version() + platform,
		},
		{
			name: "malformed time and modified, a short revision",
			bi: &debug.BuildInfo{Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "yesterday"}, {Key: "vcs.modified", Value: "maybe"},
			}},
			want: Info{Version: Unknown, Revision: "abc123", GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH},
			line: "edge-agent version=unknown revision=abc123 modified=false time=unknown go=" + runtime.Version() + platform,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := from(tt.bi, tt.override)
			if got != tt.want {
				t.Errorf("from() = %+v\nwant %+v", got, tt.want)
			}
			if line := got.Line("edge-agent"); line != tt.line {
				t.Errorf("Line() = %q\nwant %q", line, tt.line)
			}
		})
	}
}

// TestReadHonoursTheLinkTimeVersion: what -ldflags -X sets is the version
// Read reports; without it, the binary's own record.
func TestReadHonoursTheLinkTimeVersion(t *testing.T) {
	if got := Read(); got.Version == "" || got.GoVersion != runtime.Version() || got.OS != runtime.GOOS || got.Arch != runtime.GOARCH {
		t.Errorf("Read() = %+v; want a version and this runtime's Go version and platform", got)
	}
	saved := version
	t.Cleanup(func() { version = saved })
	version = "v9.9.9-test"
	if got := Read().Version; got != "v9.9.9-test" {
		t.Errorf("Read().Version with the link-time version set = %q; want v9.9.9-test", got)
	}
	if line := Read().Line("rollup"); !strings.HasPrefix(line, "rollup version=v9.9.9-test ") || strings.Contains(line, "\n") {
		t.Errorf("Read().Line = %q; want one line starting with the command and the version", line)
	}
}
