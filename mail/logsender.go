package mail

import (
	"context"
	"errors"
	"log/slog"
)

// LogSender "delivers" a message by writing it, link included, to a log:
// for development and the demo, where following the link from the log is
// the whole point. It is the only place in the package that logs a link;
// never use it where the log is read by anyone who should not be able to
// reset the user's password.
type LogSender struct {
	log *slog.Logger
}

// NewLogSender returns a sender writing to l at INFO. l must not be nil.
func NewLogSender(l *slog.Logger) (*LogSender, error) {
	if l == nil {
		return nil, errors.New("log sender: nil logger")
	}
	return &LogSender{log: l}, nil
}

// Send writes one line: msg "mail", and type, to, url and id.
func (s *LogSender) Send(ctx context.Context, m Message, id string) error {
	s.log.LogAttrs(ctx, slog.LevelInfo, "mail",
		slog.String("type", string(m.Kind)),
		slog.String("to", m.To),
		slog.String("url", m.URL),
		slog.String("id", id))
	return nil
}
