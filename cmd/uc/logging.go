package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// logOptions are the flags of a command's logs.
type logOptions struct {
	level, format string
}

func (o *logOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.level, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.format, "log-format", "text", "text (key=value pairs, logfmt) or json (one JSON object a line)")
}

// logger is the process's logger, writing to w. client-go (klog) and
// anything that logs through slog's or the log package's default logger
// write through it too, so that the process writes one format.
func (o logOptions) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", o.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch o.format {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", o.format)
	}
	log := slog.New(h)
	slog.SetDefault(log)
	klog.SetSlogLogger(log)
	return log, nil
}
