package idem

import "log/slog"

// logAttrs returns the log attributes that describe an attempt of c.
func logAttrs(c *call, res result) []slog.Attr {
	return []slog.Attr{
		slog.String("method", c.req.Method),
		slog.String("url", redact(c.req)),
		slog.String("key", c.key),
		slog.Int("attempt", res.number),
		slog.String("certainty", res.certainty.String()),
		slog.Int("status", res.status),
	}
}
