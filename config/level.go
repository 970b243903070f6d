package config

import "log/slog"

type levelText = slog.Level

// The log formats (log_format).
const (
	// LogText writes each record as a line of key=value pairs
	// (slog.TextHandler).
	LogText = "text"
	// LogJSON writes each record as a JSON object on a line of its own
	// (slog.JSONHandler), for a log shipper.
	LogJSON = "json"
)

// Level returns the configured log level (validated by Finish).
func (c Config) Level() slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(c.LogLevel))
	return l
}
