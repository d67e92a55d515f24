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

//go:embed read.lua
var read string

//go:embed evict.lua
var evict string

//go:embed uncertain.lua
var uncertain string

//go:embed resolve.lua
var resolve string

// The scripts, each with the prelude's clock and helpers after a shebang
// that declares its flags (Redis 7.0 and later). Redis refuses a script
// with a shebang as a whole, before it runs, when it is at maxmemory and
// the script lacks allow-oom (Redis's documented "Eval flags"); a script
// without one is refused only if its first write needs memory, and the
// claim's first write, a DEL, does not. So the claim, which admits new
// work, is refused at maxmemory before the handler runs; every script of
// an admitted attempt or of a reconciler runs there, so that the outcome
// of an effect that happened is recorded.
var (
	Claim      = script("", claim)
	Complete   = script("allow-oom", complete)
	Abort      = script("allow-oom", abort)
	Extend     = script("allow-oom", extend)
	Checkpoint = script("allow-oom", checkpoint)
	Free       = script("allow-oom", free)
	Postpone   = script("allow-oom", postpone)
	Due        = script("no-writes,allow-oom", due)
	Take       = script("allow-oom", take)
	Prune      = script("allow-oom", prune)
	Read       = script("no-writes,allow-oom", read)
	Evict      = script("allow-oom", evict)
	Uncertain  = script("allow-oom", uncertain)
	Resolve    = script("allow-oom", resolve)
)

// script is body after the shebang declaring flags (none: "") and the
// prelude.
func script(flags, body string) *redis.Script {
	shebang := "#!lua"
	if flags != "" {
		shebang += " flags=" + flags
	}
	return redis.NewScript(shebang + "\n" + prelude + "\n" + body)
}
