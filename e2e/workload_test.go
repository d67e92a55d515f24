package e2e

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/idemkit/idem/testserver"
)

// The operations of a run: payments from funded accounts, which must all
// succeed; from an empty account, a 402 (the payment's own outcome,
// stored and replayed); and from an account that does not exist, a 400
// (a rejection: nothing stored, a retry is processed afresh). The two
// kinds of definite failure give the checker's "no lying definite
// failure" something to check.
const (
	fundedAccounts = 16
	emptyAccount   = "acct-empty"
	missingAccount = "acct-missing"
	// fundedBalance covers every payment of a 100,000-operation soak run.
	fundedBalance = int64(10_000_000_000)
	maxAmount     = 10_000
	// The share of operations that pay from the empty and the missing
	// account.
	emptyShare, missingShare = 0.03, 0.02
)

// tenant is the tenant of every test's accounts; token authenticates it.
const (
	tenant = "e2e"
	token  = "Bearer " + tenant + ":client"
)

// operation is one logical payment.
type operation struct {
	// key is the Idempotency-Key, derived from the seed and the index (so
	// that a rerun with the seed meets the same faults), and the payment's
	// reference.
	key     string
	account string
	amount  int64
	// want is the status that ends the operation when it took effect as
	// designed: 201, or 402 from the empty account, 400 from the missing one.
	want int
	// deadline bounds each call of the operation; zero: the payer's.
	deadline time.Duration
}

// workload returns the n operations of a seed. Everything about an
// operation is drawn from (seed, its key), so the same seed gives the same
// operations, whatever runs them.
func workload(seed uint64, n int) []operation {
	ops := make([]operation, n)
	for i := range ops {
		key := fmt.Sprintf("e2e-%016x-%07d", seed, i)
		op := operation{key: key, want: 201}
		op.amount = 1 + int64(testserver.Draw(seed, "amount", key, 0)*maxAmount)
		switch u := testserver.Draw(seed, "account", key, 0); {
		case u < emptyShare:
			op.account, op.want = emptyAccount, 402
		case u < emptyShare+missingShare:
			op.account, op.want = missingAccount, 400
		default:
			op.account = fundedAccount(int(u * 1e6))
		}
		ops[i] = op
	}
	return ops
}

// fundedAccount names the funded account n (mod fundedAccounts).
func fundedAccount(n int) string {
	return fmt.Sprintf("acct-%02d", n%fundedAccounts)
}

// initialBalances are the accounts a run starts with.
func initialBalances() map[string]int64 {
	b := map[string]int64{emptyAccount: 0}
	for i := range fundedAccounts {
		b[fundedAccount(i)] = fundedBalance
	}
	return b
}

// opsFlag sets the operations of TestChaos, and chargesFlag those of
// TestChaosCharges, for soak runs; IDEM_E2E_OPS and IDEM_E2E_CHARGES do the
// same from the environment. (A flag is package state, as every test flag
// is; it is read, never written, by the tests.)
var (
	opsFlag     = flag.Int("e2e.ops", 0, "operations of TestChaos (0: $"+opsEnv+", else 2000; 300 with -short)")
	chargesFlag = flag.Int("e2e.charges", 0, "charges of TestChaosCharges (0: $"+chargesEnv+", else 500; 200 with -short)")
)

const (
	opsEnv     = "IDEM_E2E_OPS"
	chargesEnv = "IDEM_E2E_CHARGES"
)

// chaosOps returns the operations TestChaos makes: -e2e.ops, else
// $IDEM_E2E_OPS, else 2000 (300 with -short).
func chaosOps(t *testing.T) int {
	t.Helper()
	return opsSetting(t, *opsFlag, opsEnv, 2000, 300)
}

// chargeOps returns the charges TestChaosCharges makes: -e2e.charges, else
// $IDEM_E2E_CHARGES, else 500 (200 with -short).
func chargeOps(t *testing.T) int {
	t.Helper()
	return opsSetting(t, *chargesFlag, chargesEnv, 500, 200)
}

// opsSetting is the flag's value when it is set, else the environment
// variable's, else dflt (short with -short).
func opsSetting(t *testing.T, flagValue int, env string, dflt, short int) int {
	t.Helper()
	if flagValue > 0 {
		return flagValue
	}
	if s := os.Getenv(env); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number of operations", env, s)
		}
		return n
	}
	if testing.Short() {
		return short
	}
	return dflt
}

func TestWorkloadIsTheSeeds(t *testing.T) {
	a, b := workload(42, 500), workload(42, 500)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("workload(42, 500) differs between two calls")
	}
	if fmt.Sprint(a) == fmt.Sprint(workload(43, 500)) {
		t.Fatal("workload(43, 500) = workload(42, 500), want other operations")
	}
	wants := map[int]int{}
	for _, op := range a {
		wants[op.want]++
		if op.amount < 1 || op.amount > maxAmount {
			t.Errorf("%s: amount %d, want 1..%d", op.key, op.amount, maxAmount)
		}
	}
	for _, status := range []int{201, 402, 400} {
		if wants[status] == 0 {
			t.Errorf("workload(42, 500) has no operation that ends in %d", status)
		}
	}
}
