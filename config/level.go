package config

import "log/slog"

type levelText = slog.Level

// Level returns the configured log level (validated by Finish).
func (c Config) Level() slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(c.LogLevel))
	return l
}
