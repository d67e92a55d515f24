package rpctest

import (
	"sync"
	"time"

	"github.com/idemkit/idem"
)

// FastRetries is a client Config whose backoff is short, so that the
// tests do not wait; its observer appends the key of each attempt to
// keys, under mu.
func FastRetries(keys *[]string, mu *sync.Mutex) idem.Config {
	return idem.Config{
		Backoff: idem.Backoff{Base: time.Millisecond, Cap: 2 * time.Millisecond},
		Observer: idem.Observer{OnAttempt: func(a idem.Attempt) {
			mu.Lock()
			defer mu.Unlock()
			*keys = append(*keys, a.Key)
		}},
	}
}
