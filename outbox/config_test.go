package outbox

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The defaults are stated in Config's field docs only (no exported
// constants): a zero or negative field resolves to the value its doc says.
func TestConfigDefaults(t *testing.T) {
	zero, err := newSettings(Config{})
	require.NoError(t, err)
	negative, err := newSettings(Config{
		Timeout: -1, MaxAttempts: -1, MaxAge: -1, KeyRetention: -1, MinBackoff: -1, MaxBackoff: -1,
		Workers: -1, RescueAfter: -1, PollInterval: -1, FetchCooldown: -1, Queues: -1, StopTimeout: -1,
	})
	require.NoError(t, err)
	for _, s := range []*settings{zero, negative} {
		tests := []struct {
			field     string
			got, want any
		}{
			{"Timeout", s.Timeout, 30 * time.Second},
			{"MaxAttempts", s.MaxAttempts, 25},
			{"MaxAge", s.MaxAge, 12 * time.Hour},
			{"KeyRetention", s.KeyRetention, 24 * time.Hour},
			{"MinBackoff", s.MinBackoff, time.Second},
			{"MaxBackoff", s.MaxBackoff, 5 * time.Minute},
			{"Workers", s.Workers, 20},
			{"RescueAfter", s.RescueAfter, time.Minute}, // Timeout + 30 s
			{"PollInterval", s.PollInterval, time.Second},
			{"FetchCooldown", s.FetchCooldown, 2 * time.Millisecond},
			{"Queues", s.Queues, 16},
			{"StopTimeout", s.StopTimeout, 30 * time.Second}, // Timeout
		}
		for _, tt := range tests {
			assert.Equal(t, tt.want, tt.got, "Config.%s", tt.field)
		}
		assert.NotNil(t, s.Logger, "Config.Logger")
	}
}
