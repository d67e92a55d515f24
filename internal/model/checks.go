package model

// Checks are the runs of the model that must find no error. Their bounds
// (idem.pml's defaults, in ticks: a lease of 2, a retention of 4, the
// minimum Config allows; a reconciler lease of 1, a pass every tick, MaxAge
// 2, a backoff of 1) are scaled down from the defaults (30 s, 24 h, 30 s,
// 10 s, 1 h, 5 min), whose margins are far wider.
var Checks = []Config{
	// Two clients, three requests each, one sending a second fingerprint;
	// the reconciler, which may settle up to a tick past its lease; the
	// sweeper.
	{Name: "leased", Defines: []string{"REQS=3"}},
	// The same with two requests each, under weak fairness, with the
	// reconciler settling within its lease (its ReconcileFunc's context
	// ends with it).
	{Name: "leased-settled", Defines: []string{"OVERRUN=0"}, Liveness: true},
	// A record written without the lease margin, whose attempt still runs,
	// and a client.
	{Name: "leased-legacy-record", Defines: []string{"LEGACY=1", "CLIENTS=1", "REQS=3"}},
	// Three clients of a Transactional route, three requests each.
	{Name: "transactional", Defines: []string{"MODE=TX", "CLIENTS=3", "REQS=3"}},
	// An outbox message: two dispatchers (one may die mid-delivery), three
	// deliveries per window, a key retention of 3 ticks, two re-drives.
	{Name: "outbox", File: "outbox.pml"},
}

// Mutant is a seeded fault of the model, and the property whose violation
// spin must report for it.
type Mutant struct {
	Config
	Breaks string
}

// Mutants are the model with one statement weakened as a buggy store would
// have it. Each runs in the smallest configuration that shows its fault.
var Mutants = []Mutant{
	// sqlComplete without "token = $2".
	{Config{Name: "complete-ignores-token", Defines: []string{"M_COMPLETE_NO_TOKEN"}}, "stale write"},
	// sqlSweep without its locked_until condition. On the records this
	// version writes the condition is implied by the lease margin (which
	// the checks prove), so only a record without the margin shows it.
	{Config{Name: "sweep-ignores-lease", Defines: []string{"M_SWEEP_IGNORES_LEASE", "LEGACY=1", "CLIENTS=1"}}, "live lease"},
	// sqlTakeover keeping the token instead of drawing one.
	{Config{Name: "takeover-keeps-token", Defines: []string{"M_TAKEOVER_SAME_TOKEN"}}, "stale write"},
	// sqlComplete, sqlFree and sqlPostpone of the reconciler without
	// "token = $2".
	{Config{Name: "reconciler-ignores-token", Defines: []string{"M_RECONCILER_NO_TOKEN"}}, "stale write"},
	// sqlTakeover trusting what sqlRead saw instead of matching the token,
	// the state and the lease again as it writes: the orphan recovery of
	// aws-powertools/powertools-lambda-typescript#5714.
	{Config{Name: "takeover-trusts-read", Defines: []string{"M_TAKEOVER_TRUSTS_READ"}}, "completed"},
	// sqlSweep without its state condition: it deletes an uncertain record
	// past its retention, before an operator resolved it.
	{Config{Name: "sweep-ignores-uncertain", Defines: []string{"M_SWEEP_IGNORES_UNCERTAIN"}}, "uncertain kept"},
	// A configuration, not a statement: ReconcileConfig.MaxAge at the
	// retention instead of under it. An abandoned operation then expires
	// before it is parked.
	{Config{Name: "maxage-at-retention", Defines: []string{"OVERRUN=0", "MAXAGE=4"}, Liveness: true}, "settled"},
	// The outbox (outbox.pml): Redrive without its ErrPastRetention
	// check, forgetting the first delivery as RedrivePastRetention does.
	{Config{Name: "outbox-redrive-past-retention", File: "outbox.pml", Defines: []string{"M_REDRIVE_PAST_RETENTION"}}, "once"},
	// settings.decide and settings.overdue without the key retention.
	{Config{Name: "outbox-retry-past-retention", File: "outbox.pml", Defines: []string{"M_RETRY_PAST_RETENTION"}}, "once"},
	// A re-drive under a new key.
	{Config{Name: "outbox-redrive-new-key", File: "outbox.pml", Defines: []string{"M_REDRIVE_NEW_KEY"}}, "once"},
}

// MutantNamed returns the mutant named name, and false when there is none.
func MutantNamed(name string) (Mutant, bool) {
	for _, m := range Mutants {
		if m.Name == name {
			return m, true
		}
	}
	return Mutant{}, false
}
