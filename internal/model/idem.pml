/*
 * idem.pml: the record lifecycle of idem's server package, for spin 6.
 *
 * It models what docs/CONTRACT.md (§5 to §7) and the Store contract
 * (server/store.go) state, at the grain of PostgresStore's statements
 * (server/postgres_sql.go, postgres_reconcile.go): each inline named after
 * a SQL constant is one statement, executed atomically, and anything may
 * happen between two of them. docs/CONTRACT.md §10 maps each to its SQL.
 * MemoryStore runs a claim's read and write under one mutex, so its
 * behaviours are a subset of these.
 *
 * One key (the scope) on one route, Leased or Transactional (MODE);
 * CLIENTS client processes that send REQS requests each; one reconciler
 * (Leased mode), one sweeper, and a clock. Times are ticks left (of a
 * lease, a retention, a backoff) or elapsed (an age), saturating at 0 or
 * at their bound, so the clock runs forever over a finite state space. The
 * clock stops when the reconciler is due (rc_budget): it runs a pass at
 * least every INTERVAL and settles what it took within RLEASE + OVERRUN,
 * which may outlast its lease.
 *
 * Properties, named after the contract's words (pan reports the assertion
 * that failed):
 *   one completion   at most one attempt's completion is stored per scope
 *                    per retention (store_completion);
 *   stale write      a write with a stale token changes nothing
 *                    (owner_writes);
 *   live lease       a live lease is never swept or taken over; in
 *                    Transactional mode, one attempt runs at a time
 *                    (grant, Sweeper, txCommit);
 *   completed        a completed record is never overwritten or reopened
 *                    (not_completed);
 *   fingerprint      the request that a record answers is always the one
 *                    it stored (sqlRead_decide, txRead, sqlTakeover);
 *   lease margin     a live lease ends before the record's retention, so
 *                    a retry after a lease ended finds the record (margin);
 *   uncertain kept   an operation left uncertain at MaxAge is never swept
 *                    or reclaimed until an operator resolves it
 *                    (uncertain_kept);
 *   settled (ltl)    under weak fairness, every abandoned operation is
 *                    eventually settled, by a retry or the reconciler, and
 *                    none is swept unsettled.
 *
 * Ghost variables (g...) hold what the protocol intends (who owns the
 * scope, whose lease is live, which completion is stored); the record holds
 * what the statements wrote. The properties compare the two, so a mutant
 * that weakens a statement shows up as a broken property. Mutants (-D):
 * M_COMPLETE_NO_TOKEN, M_SWEEP_IGNORES_LEASE, M_TAKEOVER_SAME_TOKEN,
 * M_RECONCILER_NO_TOKEN, M_TAKEOVER_TRUSTS_READ, M_SWEEP_IGNORES_UNCERTAIN.
 *
 * Every statement that reaches the store prints "EV pid op ...", before
 * the assertions of its step, so that a counterexample trail can be
 * replayed against the real stores (server/model_replay_test.go).
 */

/* ---- bounds, in ticks ---- */
#ifndef LEASE
#define LEASE 2          /* Config.Lease */
#endif
#ifndef RETENTION
#define RETENTION 4      /* Config.Retention: at least 2*LEASE */
#endif
#ifndef RLEASE
#define RLEASE 1         /* ReconcileConfig.Lease */
#endif
#ifndef OVERRUN
#define OVERRUN 1        /* how far past its lease the reconciler may settle */
#endif
#ifndef INTERVAL
#define INTERVAL 1       /* ReconcileConfig.Interval */
#endif
#ifndef MAXAGE
#define MAXAGE 2         /* ReconcileConfig.MaxAge */
#endif
#ifndef BACKOFF
#define BACKOFF 1        /* the reconciler's backoff after NotKnown */
#endif
#ifndef CLIENTS
#define CLIENTS 2        /* the last one may send a second fingerprint */
#endif
#ifndef REQS
#define REQS 2           /* requests each client sends */
#endif
#ifndef MODE
#define MODE LEASED
#endif
#ifndef LEGACY
#define LEGACY 0         /* 1: the key starts with a record of an older version */
#endif

#define LEASED 1
#define TX 2
#define MAXROUNDS 4      /* maxClaimRounds */
#define OPEN 255         /* a ghost hold with no end: an open transaction */
#define FOREVER 255      /* the clock's budget with no reconciler */
#define NPROC 8
#define ME _pid

/* record states; NONE: no row */
#define NONE 0
#define RUNNING 1
#define DONE 2
#define UNAVAIL 3
#define UNCERTAIN 4      /* not known at MaxAge: kept until an operator resolves it */
#define NOTAPPLIED 5     /* resolved as not applied: expired at once, the key is free */

mtype = { claimed, replay, inflight, mismatch, unavailable, uncertain, contention, reclaim, takeover, pending };
mtype = { ok, lost, released, ended };

typedef Record {
	byte state;
	bit  first;   /* attempt = 1 */
	byte fp;      /* the fingerprint of the request it stores */
	byte lease;   /* ticks left to locked_until; 0: ended or none */
	byte exp;     /* ticks left to expires_at; 0: expired */
	byte due;     /* ticks left to reconcile_at; 0: due */
	byte age;     /* ticks since created_at while running, up to MAXAGE */
	bit  point;   /* a recovery point is recorded */
	byte resp;    /* the fingerprint of the request whose response is stored */
};

Record rec;
bit    advisory;            /* Transactional: the scope's advisory lock is held */
byte   rowlock;             /* Transactional: the pid whose open transaction holds the row */
byte   rc_budget = FOREVER; /* ticks the clock may run before the reconciler must act */
byte   txexp[NPROC];        /* Transactional: the retention left of an open transaction's record */
byte   hi;                  /* a loop counter, 0 between steps */

/* Fencing tokens. The stores draw a random UUID per attempt and only ever
   compare a token with the record's, so a token is modelled by whether it
   is the record's current one: owntok[p], the live attempt of process p
   holds it; readtok[p], the token p's claim read (sqlRead) for its
   sqlTakeover still is it. A new token makes every other one stale. */
bit owntok[NPROC];
bit readtok[NPROC];

/* ghosts */
byte gowner;       /* the attempt that owns the scope (0: none) */
byte gheld;        /* the attempt whose lease (or open transaction) holds the scope */
byte glease;       /* ticks left of gheld's hold as it was granted; OPEN: a transaction */
bit  gdone;        /* the record holds a stored completion */
byte gans;         /* ticks left of the last stored completion's retention, kept past its deletion */
bit  gsettled = 1; /* the current operation was settled (none pending: 1) */
bit  gforgot;      /* an unsettled operation was swept or reclaimed */
bit  guncertain;   /* the record is uncertain, waiting for an operator */

#define dec(x) if :: x > 0 && x != OPEN -> x-- :: else fi
#define abandoned (rec.state == RUNNING && rec.lease == 0 && MODE == LEASED)

inline stale_all() {
	for (hi : 0 .. NPROC-1) { owntok[hi] = 0; readtok[hi] = 0 }
	hi = 0
}
inline fresh() { stale_all(); owntok[ME] = 1 }
inline max_exp(n) { if :: rec.exp < n -> rec.exp = n :: else fi }

/* ---- properties ---- */

/* live lease: the scope changes hands only when no other hold is live */
inline grant(ticks) {
	assert(gheld == 0 || gheld == ME || glease == 0);
	gheld = ME; glease = ticks; gowner = ME
}
inline unhold() {
	if :: gheld == ME -> gheld = 0; glease = 0 :: else fi
}
/* stale write: a write that changes the record is its owner's */
inline owner_writes() { assert(gowner == ME) }
/* completed: nothing changes a completed record but its expiry */
inline not_completed() { assert(!gdone) }
/* one completion: per scope per retention; the fields of a running
   record mean nothing once it is completed */
inline store_completion(st, f) {
	assert(gans == 0);
	rec.state = st; rec.resp = f; rec.lease = 0; rec.first = 0; rec.point = 0;
	rec.due = 0; rec.age = 0;
	gans = rec.exp; gdone = 1; gsettled = 1; unhold()
}
/* uncertain kept: an uncertain record is never swept, reclaimed or
   taken over before an operator resolves it */
inline uncertain_kept() { assert(!guncertain) }
/* lease margin: a live lease ends before the record expires; checked
   where a lease is granted (a legacy record comes without the margin, and
   any grant on it restores the margin) */
inline margin() { assert(rec.state != RUNNING || rec.lease == 0 || rec.exp > rec.lease) }

inline forget() {
	stale_all();
	rec.state = NONE; rec.first = 0; rec.fp = 0; rec.lease = 0; rec.exp = 0;
	rec.due = 0; rec.age = 0; rec.point = 0; rec.resp = 0;
	gowner = 0; gheld = 0; glease = 0; gdone = 0
}

/* ---- the clock ---- */

proctype Clock() {
	do
	:: d_step {
		rc_budget > 0 ->
		printf("EV %d tick\n", ME);
		if :: rc_budget != FOREVER -> rc_budget-- :: else fi;
		dec(rec.lease); dec(rec.exp); dec(rec.due);
		if :: rec.state == RUNNING && rec.age < MAXAGE -> rec.age++ :: else fi;
		dec(glease); dec(gans);
#if MODE == TX
		for (hi : 0 .. NPROC-1) { dec(txexp[hi]) }
		hi = 0
#endif
	   }
	od
}

/* ---- Leased claims: claimLeased, settle and steal (postgres.go) ---- */

/* sqlInsert and sqlReclaim write the first attempt of a new operation */
inline claim_new(fp) {
	printf("EV %d claim %d claimed 1 0\n", ME, fp);
	uncertain_kept();
	if :: rec.state == RUNNING && !LEGACY -> gforgot = 1 :: else fi; /* reclaimed unsettled */
	fresh(); grant(LEASE);
	rec.state = RUNNING; rec.first = 1; rec.fp = fp; rec.lease = LEASE; rec.exp = RETENTION;
	rec.due = 0; rec.age = 0; rec.point = 0; rec.resp = 0;
	gdone = 0; gsettled = 0; margin()
}

inline sqlInsert(fp, v) {
	atomic { if :: rec.state == NONE -> claim_new(fp); v = claimed :: else fi }
}

/* sqlRead, and decide (store.go) on what it read */
inline sqlRead_decide(fp, v) {
	atomic {
		if
		:: rec.state == NONE -> v = pending
		:: rec.state != NONE && rec.exp == 0 && !(rec.state == RUNNING && rec.lease > 0) && rec.state != UNCERTAIN -> v = reclaim
		:: else ->
			if
			:: rec.fp != fp -> v = mismatch
			:: rec.fp == fp && rec.state == DONE -> v = replay
			:: rec.fp == fp && rec.state == UNAVAIL -> v = unavailable
			:: rec.fp == fp && rec.state == UNCERTAIN -> v = uncertain
			:: rec.fp == fp && rec.state == RUNNING && rec.lease > 0 -> v = inflight
			:: rec.fp == fp && rec.state == RUNNING && rec.lease == 0 -> v = takeover; readtok[ME] = 1
			fi;
			if
			:: v != takeover -> printf("EV %d claim %d %e 0 0\n", ME, fp, v);
				assert(v != replay || rec.resp == fp) /* fingerprint */
			:: else -> printf("EV %d read %d takeover\n", ME, fp)
			fi
		fi
	}
}

inline sqlReclaim(fp, v) {
	atomic {
		if
		:: rec.state != NONE && rec.exp == 0 && rec.state != UNCERTAIN -> claim_new(fp); v = claimed
		:: else -> v = pending
		fi
	}
}

#ifdef M_TAKEOVER_TRUSTS_READ
#define TAKEOVER_WHERE (rec.state != NONE)
#else
#define TAKEOVER_WHERE (readtok[ME] && rec.state == RUNNING && rec.lease == 0 && rec.exp > 0)
#endif

inline sqlTakeover(fp, v) {
	atomic {
		if
		:: TAKEOVER_WHERE ->
			printf("EV %d claim %d claimed 0 %d\n", ME, fp, rec.point);
			not_completed();
			assert(rec.fp == fp); /* fingerprint: the retry that takes over is the stored request */
#ifdef M_TAKEOVER_SAME_TOKEN
			owntok[ME] = 1; /* the record keeps the token its last attempt holds */
#else
			fresh();
#endif
			grant(LEASE);
			rec.state = RUNNING; rec.first = 0; rec.lease = LEASE; max_exp(RETENTION);
			margin(); v = claimed
		:: else -> v = pending
		fi;
		readtok[ME] = 0
	}
}

inline claimLeased(fp, v, round) {
	sqlInsert(fp, v);
	do
	:: v == claimed -> break
	:: v != claimed && round == MAXROUNDS ->
		printf("EV %d claim %d contention 0 0\n", ME, fp); v = contention; break
	:: v != claimed && round < MAXROUNDS ->
		round++;
		sqlRead_decide(fp, v);
		if
		:: v == pending -> sqlInsert(fp, v)
		:: v == reclaim -> sqlReclaim(fp, v)
		:: v == takeover -> sqlTakeover(fp, v)
		:: else -> break
		fi
	od;
	round = 0
}

/* ---- fenced writes: pgFence (postgres_attempt.go) ---- */

#ifdef M_COMPLETE_NO_TOKEN
#define COMPLETE_WHERE (rec.state == RUNNING)
#else
#define COMPLETE_WHERE (owntok[ME] && rec.state == RUNNING)
#endif
#define FENCE_WHERE (owntok[ME] && rec.state == RUNNING)

inline sqlComplete(fp, r) {
	atomic {
		if
		:: COMPLETE_WHERE ->
			printf("EV %d complete ok\n", ME);
			not_completed(); owner_writes(); store_completion(DONE, fp); r = ok
		:: !COMPLETE_WHERE -> printf("EV %d complete lost\n", ME); r = lost
		fi
	}
}

inline sqlCheckpoint(r) {
	atomic {
		if
		:: FENCE_WHERE ->
			printf("EV %d checkpoint ok\n", ME);
			not_completed(); owner_writes(); rec.point = 1; r = ok
		:: !FENCE_WHERE -> printf("EV %d checkpoint lost\n", ME); r = lost
		fi
	}
}

inline sqlExtend(r) {
	atomic {
		if
		:: FENCE_WHERE ->
			printf("EV %d extend ok\n", ME);
			not_completed(); owner_writes(); grant(LEASE);
			rec.lease = LEASE; max_exp(2 * LEASE); margin(); r = ok
		:: !FENCE_WHERE -> printf("EV %d extend lost\n", ME); r = lost
		fi
	}
}

/* abort: sqlRelease when the request was refused (4xx), then sqlEndLease
   when that freed nothing */
inline sqlAbort(reject, r) {
	atomic {
		if
		:: reject && FENCE_WHERE && rec.first && !rec.point ->
			printf("EV %d abort %d released\n", ME, reject);
			not_completed(); owner_writes(); forget(); gsettled = 1; r = released
		:: !(reject && FENCE_WHERE && rec.first && !rec.point) && FENCE_WHERE ->
			printf("EV %d abort %d ended\n", ME, reject);
			not_completed(); owner_writes(); rec.lease = 0; unhold(); r = ended
		:: !FENCE_WHERE -> printf("EV %d abort %d lost\n", ME, reject); r = lost
		fi
	}
}

/* the handler of a won Leased claim: may record a recovery point and
   extend, then completes, is refused (4xx), fails (5xx, panic) or dies;
   time passes between its steps */
inline handleLeased(fp, r) {
	if
	:: sqlCheckpoint(r)
	:: skip
	fi;
	if
	:: r != lost -> sqlExtend(r)
	:: skip
	fi;
	if
	:: r == lost -> sqlAbort(0, r) /* ErrLeaseLost: the handler answers 500 */
	:: r != lost -> sqlComplete(fp, r)
	:: r != lost -> sqlAbort(1, r)
	:: r != lost -> sqlAbort(0, r)
	:: r != lost -> printf("EV %d crash\n", ME)
	fi;
	atomic { owntok[ME] = 0; if :: gowner == ME -> gowner = 0 :: else fi; r = 0 }
}

/* ---- Transactional claims: claimTx, settleTx (postgres_tx.go) ---- */

/* sqlRead in the claim's transaction (read committed) */
inline txRead(fp, v) {
	atomic {
		if
		:: rec.state == NONE -> v = claimed
		:: rec.state != NONE && rec.exp == 0 -> v = reclaim
		:: else ->
			assert(rec.state != RUNNING); /* a Transactional record commits completed */
			if
			:: rec.fp != fp -> v = mismatch
			:: rec.fp == fp && rec.state == DONE -> v = replay;
				assert(rec.resp == fp) /* fingerprint */
			:: rec.fp == fp && rec.state == UNAVAIL -> v = unavailable
			fi
		fi
	}
}

/* BEGIN, sqlTryLock and sqlRead; then, without the lock, sqlWaitLock and
   sqlRead, or 409 when the wait bound passes; with it, a new key or
   sqlReclaim in the transaction (its row locked until the end) */
inline claimTx(fp, v, locked, round) {
	atomic { if :: !advisory -> advisory = 1; locked = 1 :: else fi }
	txRead(fp, v);
	do
	:: round == MAXROUNDS -> v = contention; break
	:: round < MAXROUNDS ->
		round++;
		if
		:: v != claimed && v != reclaim -> break
		:: !locked ->
			if
			:: atomic { !advisory -> advisory = 1; locked = 1 }; txRead(fp, v)
			:: v = inflight; break
			fi
		:: locked && v == claimed ->
			atomic { grant(OPEN); txexp[ME] = RETENTION; v = pending }; break
		:: locked && v == reclaim ->
			atomic {
				if
				:: rec.state != NONE && rec.exp == 0 ->
					grant(OPEN); rowlock = ME; txexp[ME] = RETENTION; v = takeover
				:: else -> v = 0
				fi
			};
			if :: v == takeover -> break :: else -> txRead(fp, v) fi
		fi
	od;
	printf("EV %d claim %d %e 1 0\n", ME, fp, v);
	round = 0
}

/* the commit: sqlInsertDone for a new key, sqlCompleteTx for a reclaimed row */
inline txCommit(fp) {
	atomic {
		printf("EV %d commit\n", ME);
		assert(rowlock == ME || rec.state == NONE); /* live lease: no record appeared */
		owner_writes();
		rowlock = 0; gdone = 0;
		rec.fp = fp; rec.exp = txexp[ME]; store_completion(DONE, fp);
		advisory = 0; txexp[ME] = 0; gowner = 0
	}
}

/* the rollback of a refused, failed or dead attempt, or the end of a claim
   that did not win */
inline txRollback(locked) {
	atomic {
		if :: rowlock == ME -> rowlock = 0 :: else fi;
		if :: locked -> advisory = 0; unhold() :: else fi;
		if :: gowner == ME -> gowner = 0 :: else fi;
		txexp[ME] = 0
	}
}

/* ---- clients ---- */

proctype Client(byte fps) {
	byte reqs, fp, round;
	mtype v, r;
	bit locked;
	do
	:: reqs < REQS ->
		reqs++;
		if :: fp = 1 :: fps > 1 -> fp = 2 fi;
#if MODE == LEASED
		claimLeased(fp, v, round);
		if :: v == claimed -> v = 0; handleLeased(fp, r) :: else -> v = 0 fi;
#else
		claimTx(fp, v, locked, round);
		if
		:: v == pending || v == takeover ->
			if
			:: txCommit(fp)
			:: printf("EV %d rollback\n", ME); txRollback(locked)
			fi
		:: else -> txRollback(locked)
		fi;
		v = 0; locked = 0;
#endif
		fp = 0
	:: reqs == REQS -> break
	od
}

/* ---- the reconciler: takeAbandoned, then settle (reconcile_pass.go) ---- */

#ifdef M_RECONCILER_NO_TOKEN
#define SETTLE_WHERE (rec.state == RUNNING)
#else
#define SETTLE_WHERE (owntok[ME] && rec.state == RUNNING)
#endif

/* the end of a settlement: the reconciler holds nothing */
inline settled_by_rc(holding, rfp, old) {
	holding = 0; owntok[ME] = 0; rfp = 0; old = 0; rc_budget = INTERVAL;
	if :: gowner == ME -> gowner = 0 :: else fi
}

proctype Reconciler() {
	bit holding, old;
	byte rfp;
	do
	:: !holding -> atomic { /* sqlTakeAbandoned */
		if
		:: abandoned && rec.due == 0 && rec.exp > 0 ->
			printf("EV %d take %d\n", ME, rec.age == MAXAGE);
			not_completed(); fresh(); grant(RLEASE);
			rec.first = 0; rec.lease = RLEASE; max_exp(2 * RLEASE); margin();
			holding = 1; rfp = rec.fp; old = (rec.age == MAXAGE);
			rc_budget = RLEASE + OVERRUN
		:: else -> rc_budget = INTERVAL
		fi
	   }
	:: holding -> atomic { /* Completed: sqlComplete */
		if
		:: SETTLE_WHERE ->
			printf("EV %d rcomplete ok\n", ME);
			not_completed(); owner_writes(); store_completion(DONE, rfp)
		:: !SETTLE_WHERE -> printf("EV %d rcomplete lost\n", ME)
		fi;
		settled_by_rc(holding, rfp, old)
	   }
	:: holding -> atomic { /* NotHappened: sqlFree */
		if
		:: SETTLE_WHERE ->
			printf("EV %d rfree ok\n", ME);
			not_completed(); owner_writes(); forget(); gsettled = 1
		:: !SETTLE_WHERE -> printf("EV %d rfree lost\n", ME)
		fi;
		settled_by_rc(holding, rfp, old)
	   }
	:: holding && !old -> atomic { /* NotKnown: sqlPostpone */
		if
		:: SETTLE_WHERE ->
			printf("EV %d rpostpone ok\n", ME);
			not_completed(); owner_writes(); rec.lease = 0; rec.due = BACKOFF; unhold()
		:: !SETTLE_WHERE -> printf("EV %d rpostpone lost\n", ME)
		fi;
		settled_by_rc(holding, rfp, old)
	   }
	:: holding && old -> atomic { /* NotKnown at MaxAge: uncertain (sqlUncertain) */
		if
		:: SETTLE_WHERE ->
			printf("EV %d rpark ok\n", ME);
			not_completed(); owner_writes();
			rec.state = UNCERTAIN; rec.lease = 0; rec.due = 0; rec.age = 0;
			gsettled = 1; guncertain = 1; unhold()
		:: !SETTLE_WHERE -> printf("EV %d rpark lost\n", ME)
		fi;
		settled_by_rc(holding, rfp, old)
	   }
	od
}

/* ---- the sweeper: sqlSweep (postgres_sql.go) ---- */

#ifdef M_SWEEP_IGNORES_LEASE
#define SWEEP_WHERE (rec.state != NONE && rec.exp == 0 && rowlock == 0 && rec.state != UNCERTAIN)
#elif defined(M_SWEEP_IGNORES_UNCERTAIN)
#define SWEEP_WHERE (rec.state != NONE && rec.exp == 0 && rec.lease == 0 && rowlock == 0)
#else
#define SWEEP_WHERE (rec.state != NONE && rec.exp == 0 && rec.lease == 0 && rowlock == 0 && rec.state != UNCERTAIN)
#endif

proctype Sweeper() {
	do
	:: atomic {
		SWEEP_WHERE ->
		printf("EV %d sweep 1\n", ME);
		assert(glease == 0); /* live lease */
		uncertain_kept();
		if :: rec.state == RUNNING && !LEGACY -> gforgot = 1 :: else fi;
		forget()
	   }
	od
}

/* ---- an operator: Resolve (postgres_uncertain.go, sqlResolve) ----
   It resolves an uncertain operation at any time, or never: applied (the
   stored request's response, kept at least a retention) or not applied
   (expired at once: the next claim reclaims it, the sweeper deletes it).
   Its write is fenced by the state, and draws a new token. */
proctype Operator() {
	byte ofp;
	do
	:: atomic {
		rec.state == UNCERTAIN ->
		printf("EV %d resolve applied\n", ME);
		not_completed(); stale_all(); gowner = ME; guncertain = 0;
		max_exp(RETENTION); ofp = rec.fp; store_completion(DONE, ofp); gowner = 0; ofp = 0
	   }
	:: atomic {
		rec.state == UNCERTAIN ->
		printf("EV %d resolve notapplied\n", ME);
		not_completed(); stale_all(); guncertain = 0;
		rec.state = NOTAPPLIED; rec.exp = 0
	   }
	od
}

/* The attempt of a record that an older version (or a person) wrote
   without the lease margin: its lease outlasts its retention. decide's
   leased() and the sweep's lease check are for such records. */
proctype Legacy() {
	mtype r;
	handleLeased(1, r)
}

init {
	atomic {
#if LEGACY
		hi = 3 + CLIENTS + 2 * (MODE == LEASED); /* the Legacy process's pid (after the Reconciler and the Operator) */
		rec.state = RUNNING; rec.first = 1; rec.fp = 1; rec.lease = LEASE; rec.exp = 1;
		owntok[hi] = 1; gowner = hi; gheld = hi; glease = LEASE; gsettled = 0;
		printf("EV %d legacy\n", hi);
		hi = 0;
#endif
		run Clock();
		run Sweeper();
#if MODE == LEASED
		run Reconciler();
		run Operator();
		rc_budget = INTERVAL;
#endif
		for (hi : 1 .. CLIENTS) { run Client(1 + (hi == CLIENTS)) }
		hi = 0;
#if LEGACY
		run Legacy();
#endif
	}
}

/* settled: under weak fairness (pan -a -f), every abandoned operation is
   eventually settled, and none is swept unsettled */
ltl settled { [] (abandoned -> <> gsettled) && [] !gforgot }
