package conn

import (
	"context"
	"database/sql/driver"
)

// layer is the connection a layer wraps, with the optional interfaces
// every layer passes through unchanged: database/sql asks a connection
// for them, and a wrapper that dropped one would change how the pool
// treats the driver's connections.
type layer struct {
	driver.Conn
}

func (l layer) ResetSession(ctx context.Context) error {
	if r, ok := l.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (l layer) IsValid() bool {
	if v, ok := l.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (l layer) Ping(ctx context.Context) error {
	if p, ok := l.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}
