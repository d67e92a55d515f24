package idemredis

import (
	"encoding/binary"
	"encoding/hex"
	"strconv"
)

// buckets is how many hash tags the records are spread over. A scope's
// keys (its record, and its members of the indexes) share the tag of its
// bucket, so that every script touches one cluster slot; each bucket has
// a due index per route (abandoned leases by the time they fall due) and
// one running index (running records by their first claim), which the
// reconciler, Sweep and Stats read without scanning the keyspace. It is
// part of the key layout: records written under another count are not
// found.
const buckets = 16

// keys are the Redis keys and index members of one scope's record.
type keys struct {
	record, due, running string // keys
	dueMember, runMember string // the scope in the due and running indexes
}

// keysOf lays out the keys of scope on route under prefix:
//
//	{prefix:b}:r:<scope hex>   the record, a hash
//	{prefix:b}:d:<route>       the route's due index, a sorted set of scopes
//	{prefix:b}:run             the running index, a sorted set of scope+route
func keysOf(prefix string, scope [32]byte, route string) keys {
	h := hex.EncodeToString(scope[:])
	tag := bucketTag(prefix, int(binary.BigEndian.Uint16(scope[:2])%buckets))
	return keys{
		record: tag + ":r:" + h, due: tag + ":d:" + route, running: tag + ":run",
		dueMember: h, runMember: h + route,
	}
}

// keysOfRunning is the keys of a member of bucket's running index.
func keysOfRunning(prefix string, bucket int, member string) (keys, bool) {
	if len(member) < 64 {
		return keys{}, false
	}
	var scope [32]byte
	if _, err := hex.Decode(scope[:], []byte(member[:64])); err != nil {
		return keys{}, false
	}
	k := keysOf(prefix, scope, member[64:])
	return k, k.running == bucketTag(prefix, bucket)+":run"
}

func bucketTag(prefix string, b int) string {
	return "{" + prefix + ":" + strconv.Itoa(b) + "}"
}
