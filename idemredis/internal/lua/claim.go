package lua

// ClaimArgs are the claim script's ARGV under the names that claim.lua
// gives them, in its order ([ClaimArgs.Argv]).
type ClaimArgs struct {
	Offset       int64  // the store's clock offset, ms (0 outside tests)
	Token        string // the new attempt's fencing token
	Alg          string // the request's digest algorithm
	Digest       []byte // the request's digest by Alg
	Lease        int64  // ms
	Retention    int64  // ms
	DueMember    string // the scope, in the route's due index
	RunMember    string // the scope and route, in the bucket's running index
	Tenant       string
	Principal    string
	Route        string
	Key          string
	Request      []byte // the stored request
	RecordAlg    string // the record's algorithm, once a first run answered 'alg' ("" before)
	RecordDigest []byte // the request's digest by RecordAlg
	AnyDigest    bool   // the caller does not know RecordAlg: any digest matches
	Touch        bool   // the caller WAITs for replicas: a replay writes, so that the WAIT covers it
}

// Argv is a as the script's ARGV.
func (a ClaimArgs) Argv() []any {
	return []any{a.Offset, a.Token, a.Alg, a.Digest, a.Lease, a.Retention, a.DueMember, a.RunMember,
		a.Tenant, a.Principal, a.Route, a.Key, a.Request, a.RecordAlg, a.RecordDigest, flag(a.AnyDigest), flag(a.Touch)}
}

// flag is a boolean argument as the scripts read it: '1' or '0'.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
