package grpcidem_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idem/grpcidem"
	"github.com/idemkit/idem/grpcidem/internal/sample"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/server"
)

// TestHandlerContext: the handler finds server.Tx in its context in
// Transactional mode on Postgres, and server.LeaseFrom in Leased mode, as
// an HTTP handler does; a call without a key (KeyOptional) finds neither.
func TestHandlerContext(t *testing.T) {
	pool := pgtest.Pool(t)
	require.NoError(t, server.Migrate(t.Context(), pool))
	for _, tc := range []struct {
		name           string
		mode           server.Mode
		key            string
		wantTx, wantLs bool
	}{
		{"transactional", server.Transactional, uuid.NewString(), true, false},
		{"leased", server.Leased, uuid.NewString(), false, true},
		{"no key", server.Transactional, "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gotTx, gotLs bool
			c := &counter{answer: func(ctx context.Context, n int64, req *structpb.Struct) (*structpb.Struct, error) {
				_, gotTx = server.Tx(ctx)
				_, gotLs = server.LeaseFrom(ctx)
				return structpb.NewStruct(nil)
			}}
			cfg := grpcidem.Config{Server: server.Config{Mode: tc.mode, Keys: server.KeyOptional}}
			cc := serve(t, server.NewPostgresStore(pool), cfg, c)
			_, err := sample.Pay(keyed(t.Context(), tc.key, "acme"), cc, payment(t, 5))
			require.NoError(t, err)
			assert.Equal(t, tc.wantTx, gotTx, "server.Tx found")
			assert.Equal(t, tc.wantLs, gotLs, "server.LeaseFrom found")
		})
	}
}
