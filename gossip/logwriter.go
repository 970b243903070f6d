package gossip

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// memberlist reports rejected and malformed traffic only in its log. The
// log writer below turns those lines into counters; the patterns are the
// messages of memberlist v0.7.0 (net.go, state.go), and the tests fail when
// a new version changes them.
type logClass int

const (
	classOther     logClass = iota
	classLabel              // a packet or stream with another cluster's label
	classKey                // a packet or stream that no installed key decrypts, or not encrypted
	classMalformed          // a memberlist message that does not parse
	classSuspect            // this node's probe of a peer failed
	classConflict           // two nodes claim one name
	numClasses
)

var logPatterns = []struct {
	substr string
	class  logClass
}{
	{"discarding packet with unacceptable label", classLabel},
	{"discarding stream with unacceptable label", classLabel},
	{"Decrypt packet failed", classKey},
	{"no installed keys could decrypt the message", classKey},
	{"encryption is configured but remote state is not encrypted", classKey},
	{"remote state is encrypted and encryption is not configured", classKey},
	{"payload is too small to decrypt", classKey},
	{"unsupported encryption version", classKey},
	{"cannot decrypt empty payload", classKey},
	{"cannot decode label", classMalformed},
	{"label header cannot be empty", classMalformed},
	{"unexpected double", classMalformed},
	{"Failed to decode", classMalformed},
	{"not supported", classMalformed},
	{"Received invalid msgType", classMalformed},
	{"missing message type byte", classMalformed},
	{"Got invalid checksum", classMalformed},
	{"Failed to decompress payload", classMalformed},
	{"truncated messages", classMalformed},
	{"exceeds limit", classMalformed},
	{"larger than limit", classMalformed},
	{"Suspect ", classSuspect},
	{"Conflicting address for", classConflict},
}

func classify(msg string) logClass {
	for _, p := range logPatterns {
		if strings.Contains(msg, p.substr) {
			return p.class
		}
	}
	return classOther
}

// suspectName extracts the node of "Suspect <name> has failed, no acks
// received" (node names have no spaces).
func suspectName(msg string) (string, bool) {
	i := strings.Index(msg, "Suspect ")
	if i < 0 {
		return "", false
	}
	rest := msg[i+len("Suspect "):]
	j := strings.Index(rest, " has failed")
	if j <= 0 {
		return "", false
	}
	return rest[:j], true
}

// logWriter is memberlist's log output: every line is counted by class,
// passed to onSuspect for failed probes, and logged through slog at the
// line's level, at most once per throttle interval for the rejection
// classes (a misconfigured peer would otherwise log every packet).
type logWriter struct {
	logger    *slog.Logger
	stats     *Stats
	onSuspect func(name string)
	every     time.Duration

	mu         sync.Mutex
	closed     bool
	last       [numClasses]time.Time
	suppressed [numClasses]uint64
}

func (w *logWriter) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\r\n")
	level, msg := parseLevel(line)
	class := classify(msg)
	switch class {
	case classLabel:
		w.stats.LabelRejected.Add(1)
	case classKey:
		w.stats.KeyRejected.Add(1)
	case classMalformed:
		w.stats.MalformedPackets.Add(1)
	case classConflict:
		w.stats.NameConflicts.Add(1)
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return len(p), nil
	}
	if class == classSuspect {
		if name, ok := suspectName(msg); ok && w.onSuspect != nil {
			w.onSuspect(name)
		}
	}
	var suppressed uint64
	if class == classLabel || class == classKey || class == classMalformed {
		now := time.Now()
		if now.Sub(w.last[class]) < w.every {
			w.suppressed[class]++
			return len(p), nil
		}
		w.last[class] = now
		suppressed, w.suppressed[class] = w.suppressed[class], 0
	}
	if !w.logger.Enabled(context.Background(), level) {
		return len(p), nil
	}
	if suppressed > 0 {
		w.logger.Log(context.Background(), level, msg, "source", "memberlist", "suppressed", suppressed)
	} else {
		w.logger.Log(context.Background(), level, msg, "source", "memberlist")
	}
	return len(p), nil
}

// close makes the writer drop every later line: memberlist's goroutines
// may still log after Shutdown returns, and the logger's output may be
// gone by then.
func (w *logWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// parseLevel splits memberlist's "[LEVEL] memberlist: message" lines.
func parseLevel(line string) (slog.Level, string) {
	level := slog.LevelInfo
	if strings.HasPrefix(line, "[") {
		if end := strings.IndexByte(line, ']'); end > 0 {
			switch line[1:end] {
			case "DEBUG", "TRACE":
				level = slog.LevelDebug
			case "WARN":
				level = slog.LevelWarn
			case "ERR", "ERROR":
				level = slog.LevelError
			}
			line = strings.TrimSpace(line[end+1:])
		}
	}
	line = strings.TrimPrefix(line, "memberlist: ")
	return level, line
}
