// Package lua holds the Redis scripts of the idemredis store, one per
// transition of a record, each judged by Redis's own clock (TIME): the
// store runs them, and the benchmark's Redis-only bound runs the same
// ones through a bare go-redis loop. Each script's file says its KEYS and
// ARGV; every script's ARGV[1] is the store's clock offset in
// milliseconds (0 outside tests), except prune's.
package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed prelude.lua
var prelude string

//go:embed claim.lua
var claim string

//go:embed complete.lua
var complete string

//go:embed abort.lua
var abort string

//go:embed extend.lua
var extend string

//go:embed checkpoint.lua
var checkpoint string

//go:embed free.lua
var free string

//go:embed postpone.lua
var postpone string

//go:embed due.lua
var due string

//go:embed take.lua
var take string

//go:embed prune.lua
var prune string

// The scripts, each with the prelude's clock and helpers.
var (
	Claim      = script(claim)
	Complete   = script(complete)
	Abort      = script(abort)
	Extend     = script(extend)
	Checkpoint = script(checkpoint)
	Free       = script(free)
	Postpone   = script(postpone)
	Due        = script(due)
	Take       = script(take)
	Prune      = script(prune)
)

func script(body string) *redis.Script { return redis.NewScript(prelude + "\n" + body) }
