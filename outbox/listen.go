package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// listen wakes the relay: it holds a connection taken from the pool
// (hijacked: the pool no longer counts it) that LISTENs on the channel of
// the table of enqueued messages, and puts a token in wake for each
// notification, until ctx is done. When the connection fails, it polls
// (a token every Config.PollInterval) until it has listened again.
func (o *Outbox) listen(ctx context.Context, wake chan<- struct{}) {
	for {
		err := o.listenOnce(ctx, wake)
		if ctx.Err() != nil {
			return
		}
		o.s.Logger.WarnContext(ctx, "outbox: the relay cannot listen; it polls until it can", "error", err)
		poke(wake)
		if _, live := sleep(ctx, nil, o.s.PollInterval); !live {
			return
		}
	}
}

// listenOnce listens on one connection until it fails or ctx is done.
func (o *Outbox) listenOnce(ctx context.Context, wake chan<- struct{}) error {
	pc, err := o.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pc.Hijack()
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	table, _ := o.enqueuedTables()
	var channel string
	if err := conn.QueryRow(ctx, fmt.Sprintf(sqlChannel, literal(table))).Scan(&channel); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	poke(wake) // for what was committed while nobody listened
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		poke(wake)
	}
}

// poke leaves a token in wake, unless one is there.
func poke(wake chan<- struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}
