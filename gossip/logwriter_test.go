package gossip

import (
	"bytes"
	"log"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestLogWriterCountsAndThrottles(t *testing.T) {
	var out bytes.Buffer
	var stats Stats
	var suspects []string
	w := &logWriter{
		logger:    slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo})),
		stats:     &stats,
		onSuspect: func(name string) { suspects = append(suspects, name) },
		every:     time.Hour,
	}
	l := log.New(w, "", 0) // as memberlist's logger
	for _, line := range []string{
		`[ERR] memberlist: discarding packet with unacceptable label "edgecount/eu-west": from=127.0.0.1:5000`,
		`[ERR] memberlist: discarding stream with unacceptable label "": from=127.0.0.1:5001`,
		`[ERR] memberlist: discarding packet with unacceptable label "x": from=127.0.0.1:5000`,
		`[ERR] memberlist: Decrypt packet failed: no installed keys could decrypt the message from=127.0.0.1:5000`,
		`[ERR] memberlist: failed to receive: no installed keys could decrypt the message from=127.0.0.1:5000`,
		`[ERR] memberlist: failed to receive: encryption is configured but remote state is not encrypted from=127.0.0.1:5000`,
		`[ERR] memberlist: msg type (250) not supported from=127.0.0.1:5000`,
		`[INFO] memberlist: Suspect us-east-2 has failed, no acks received`,
		`[ERR] memberlist: Conflicting address for b. Mine: 127.0.0.1:1 Theirs: 127.0.0.1:2 Old state: 0`,
		`[DEBUG] memberlist: Stream connection from=127.0.0.1:5000`,
		`[WARN] memberlist: Refuting a suspect message (from: a)`,
	} {
		l.Print(line)
	}
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"label", stats.LabelRejected.Load(), 3},
		{"key", stats.KeyRejected.Load(), 3},
		{"malformed", stats.MalformedPackets.Load(), 1},
		{"conflicts", stats.NameConflicts.Load(), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s counter = %d, want %d", c.name, c.got, c.want)
		}
	}
	if len(suspects) != 1 || suspects[0] != "us-east-2" {
		t.Errorf("suspects = %q, want [us-east-2]", suspects)
	}
	logged := out.String()
	for _, want := range []string{
		`level=ERROR msg="discarding packet with unacceptable label \"edgecount/eu-west\": from=127.0.0.1:5000" source=memberlist`,
		`level=ERROR msg="Decrypt packet failed`,
		`level=INFO msg="Suspect us-east-2 has failed`,
		`level=WARN msg="Refuting a suspect message`,
	} {
		if !strings.Contains(logged, want) {
			t.Errorf("log lacks %q:\n%s", want, logged)
		}
	}
	if n := strings.Count(logged, "unacceptable label"); n != 1 {
		t.Errorf("%d label rejections logged within one throttle interval, want 1", n)
	}
	if strings.Contains(logged, "Stream connection") {
		t.Error("a DEBUG line was logged at level INFO")
	}

	w.every = 0
	l.Print(`[ERR] memberlist: discarding packet with unacceptable label "y": from=127.0.0.1:5000`)
	if !strings.Contains(out.String(), "suppressed=2") {
		t.Errorf("next logged rejection does not report the 2 suppressed:\n%s", out.String())
	}
	w.close()
	before := out.Len()
	l.Print(`[ERR] memberlist: discarding packet with unacceptable label "z": from=127.0.0.1:5000`)
	if out.Len() != before || stats.LabelRejected.Load() != 5 {
		t.Errorf("after close: logged %d more bytes, label counter %d; want none logged, still counted (5)", out.Len()-before, stats.LabelRejected.Load())
	}
}

func TestSuspectName(t *testing.T) {
	for _, tc := range []struct {
		msg, want string
		ok        bool
	}{
		{"Suspect a-1 has failed, no acks received", "a-1", true},
		{"Suspect  has failed", "", false},
		{"Refuting a suspect message", "", false},
	} {
		got, ok := suspectName(tc.msg)
		if got != tc.want || ok != tc.ok {
			t.Errorf("suspectName(%q) = %q, %v; want %q, %v", tc.msg, got, ok, tc.want, tc.ok)
		}
	}
}
