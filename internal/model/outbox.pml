/*
 * outbox.pml: the lifecycle of one outbox message (outbox/doc.go,
 * docs/CONTRACT.md §9), for spin 6.
 *
 * One message, under one Idempotency-Key, delivered by dispatchers (one at
 * a time: River's lock; one may die mid-delivery and the message is
 * rescued), to a downstream that keeps each key's record for KEYRET ticks
 * after the effect it stored (its key retention). A delivery reaches the
 * downstream or not, and its answer comes back or not (ambiguous: the
 * delivery is retried), or is a definite refusal (parked at once). The
 * dispatcher retries after a backoff, with the same key, until MAXATT
 * deliveries or until its next delivery would come KEYRET ticks or more
 * after its first (Config.KeyRetention): then parks (settings.decide);
 * a delivery that a rescue or a re-drive brings past that bound is parked
 * before it is sent (settings.overdue). An operator re-drives
 * a parked message, same key, fresh attempts, unless a delivery may have
 * taken effect KEYRET ticks ago or more (ErrPastRetention);
 * RedrivePastRetention, the explicit choice to send it anyway, is not
 * modelled.
 *
 * Property (pan reports the assertion that failed):
 *   once   the downstream runs the message's effect at most once
 *          (at_most_once: a delivery that finds no record of its key runs
 *          the effect; one that finds it replays).
 *
 * The outbox measures the key's age from its first delivery, which comes
 * before any effect it caused: so its bound is never later than the
 * downstream's. A delivery is taken to reach the downstream when it is
 * sent (a request delayed in the network past the bound is not
 * modelled; Config.Timeout bounds it).
 *
 * Mutants (-D): M_REDRIVE_PAST_RETENTION (Redrive without its retention
 * check, forgetting the first delivery as RedrivePastRetention does), M_RETRY_PAST_RETENTION (the dispatcher ignores the key retention:
 * decide and overdue park only at MAXATT),
 * M_REDRIVE_NEW_KEY (a re-drive under a new key).
 *
 * Every step prints "EV pid op ..." like idem.pml's.
 */

#ifndef KEYRET
#define KEYRET 3         /* the downstream's key retention, in ticks */
#endif
#ifndef MAXATT
#define MAXATT 3         /* Config.MaxAttempts */
#endif
#ifndef REDRIVES
#define REDRIVES 2       /* re-drives the operator may make */
#endif

#define PENDING 1
#define DELIVERED 2
#define PARKED 3
#define NEVER 255

byte state = PENDING;
byte attempts;          /* deliveries since the last (re-)drive */
byte age = NEVER;       /* ticks since the first delivery under the key; NEVER: none yet */
byte wait;              /* backoff ticks left before the next delivery */
bit  busy;              /* a dispatcher holds the message */
byte key = 1;           /* the key deliveries carry */

/* the downstream's record of the key */
byte dkey;              /* the key it stores (0: none) */
byte dexp;              /* ticks left of its retention */
byte effects;           /* the effect's runs */

inline at_most_once() { assert(effects <= 1) }

proctype Clock() {
	do
	:: d_step {
		printf("EV %d tick\n", _pid);
		if :: age != NEVER && age < KEYRET -> age++ :: else fi;
		if :: wait > 0 -> wait-- :: else fi;
		if :: dexp > 0 -> dexp--; if :: dexp == 0 -> dkey = 0 :: else fi :: else fi
	   }
	od
}

/* the downstream receives a delivery under k */
inline receive(k) {
	if
	:: dkey == k -> printf("EV %d replay\n", _pid)
	:: dkey != k -> effects++; dkey = k; dexp = KEYRET;
		printf("EV %d effect %d\n", _pid, effects); at_most_once()
	fi
}

#ifdef M_RETRY_PAST_RETENTION
#define PAST_RETENTION 0
#define OVERDUE 0
#else
#define PAST_RETENTION (age != NEVER && age + wait >= KEYRET) /* decide */
#define OVERDUE (age != NEVER && age >= KEYRET)               /* overdue */
#endif

/* the end of a delivery that must be retried: again after a backoff, or
   parked at MAXATT or at the key retention */
inline retry() {
	if :: wait = 1 :: wait = 2 fi;
	if
	:: attempts >= MAXATT || PAST_RETENTION -> state = PARKED; printf("EV %d park\n", _pid)
	:: else -> printf("EV %d retry\n", _pid)
	fi
}

proctype Dispatcher() {
	do
	:: atomic { state == PENDING && !busy && wait == 0 -> busy = 1 }
		atomic {
			if
			:: OVERDUE -> state = PARKED; printf("EV %d overdue\n", _pid); goto free
			:: else
			fi;
			attempts++;
			if :: age == NEVER -> age = 0 :: else fi;
			printf("EV %d deliver %d %d\n", _pid, attempts, key);
			if
			:: receive(key);
				if
				:: state = DELIVERED; printf("EV %d delivered\n", _pid) /* 2xx */
				:: retry()                                               /* answer lost */
				:: printf("EV %d died\n", _pid)                          /* rescued later */
				fi
			:: retry()                                                   /* lost on the way */
			:: state = PARKED; printf("EV %d refused\n", _pid)           /* definite 4xx */
			fi;
free:			busy = 0
		}
	od
}

/* settings.redriven: refused past the retention; the mutant skips the
   check and, as RedrivePastRetention does, forgets the first delivery */
#ifdef M_REDRIVE_PAST_RETENTION
#define MAY_REDRIVE 1
#define FORGET_FIRST age = NEVER
#else
#define MAY_REDRIVE (age == NEVER || age < KEYRET)
#define FORGET_FIRST skip
#endif

proctype Operator() {
	byte n;
	do
	:: atomic {
		state == PARKED && n < REDRIVES ->
		n++;
		if
		:: MAY_REDRIVE ->
			state = PENDING; attempts = 0; wait = 0; FORGET_FIRST;
#ifdef M_REDRIVE_NEW_KEY
			key++;
#endif
			printf("EV %d redrive\n", _pid)
		:: !MAY_REDRIVE -> printf("EV %d redrive refused\n", _pid)
		fi
	   }
	:: n == REDRIVES -> break
	od
}

init {
	atomic {
		run Clock();
		run Dispatcher();
		run Dispatcher();
		run Operator()
	}
}
