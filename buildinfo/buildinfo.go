package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strconv"
	"time"
)

// version, when set at link time (-ldflags -X, see the package
// documentation), is the version Read reports instead of the module's.
var version string

// Unknown stands for what the binary does not record.
const Unknown = "unknown"

// shortRevision is how many hex digits of a revision Line shows: as many
// as a Go pseudo-version carries.
const shortRevision = 12

// Info is the identity of a build.
type Info struct {
	// Version is the one set at link time, else the main module's version
	// as the go command recorded it: a release tag (v1.2.3), a
	// pseudo-version (with +dirty for a modified tree), or "(devel)".
	// Unknown when none was recorded.
	Version string
	// Revision is the full VCS revision (vcs.revision); Unknown when the
	// build recorded none.
	Revision string
	// Modified reports that the tree had uncommitted changes
	// (vcs.modified). It means nothing when Revision is Unknown.
	Modified bool
	// Time is when Revision was committed (vcs.time); zero when unknown.
	Time time.Time
	// GoVersion is the Go release that built the binary: go1.26.8.
	GoVersion string
	// OS and Arch are the platform the binary runs on: linux, amd64.
	OS, Arch string
}

// Read returns the running binary's build.
func Read() Info {
	bi, _ := debug.ReadBuildInfo() // nil when the binary records none
	return from(bi, version)
}

// from makes the Info of bi, a binary's record (nil: none), with override,
// when not empty, as its version.
func from(bi *debug.BuildInfo, override string) Info {
	i := Info{Version: Unknown, Revision: Unknown, GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi != nil {
		if bi.Main.Version != "" {
			i.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			i.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if s.Value != "" {
					i.Revision = s.Value
				}
			case "vcs.modified":
				i.Modified, _ = strconv.ParseBool(s.Value) // anything but true is not modified
			case "vcs.time":
				i.Time, _ = time.Parse(time.RFC3339, s.Value) // zero when malformed
			}
		}
	}
	if override != "" {
		i.Version = override
	}
	return i
}

// ShortRevision returns the first 12 hex digits of Revision (all of a
// shorter one), or Unknown.
func (i Info) ShortRevision() string {
	if len(i.Revision) > shortRevision && i.Revision != Unknown {
		return i.Revision[:shortRevision]
	}
	return i.Revision
}

// Line returns the one line the command named command prints on
// --version, each field as key=value and Unknown for what is not recorded:
//
//	edge-agent version=v1.2.3 revision=0123456789ab modified=false time=2026-12-06T10:00:00Z go=go1.26.8 platform=linux/amd64
func (i Info) Line(command string) string {
	modified, when := Unknown, Unknown
	if i.Revision != Unknown {
		modified = strconv.FormatBool(i.Modified)
	}
	if !i.Time.IsZero() {
		when = i.Time.UTC().Format(time.RFC3339)
	}
	return command + " version=" + i.Version + " revision=" + i.ShortRevision() + " modified=" + modified +
		" time=" + when + " go=" + i.GoVersion + " platform=" + i.OS + "/" + i.Arch
}
