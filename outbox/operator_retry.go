package outbox

// A parked message is a cancelled (or discarded) River job, so River's own
// tools can make it due again: River UI's "retry" button, River's
// Client.JobRetry, or an UPDATE of river_job by hand. None of them runs
// Redrive's reset, and without it the message would come back with its old
// retry window: one parked after Config.MaxAttempts deliveries or at
// Config.MaxAge would be parked again at once, without a delivery, and one
// refused by its downstream would get a single delivery. The dispatcher
// therefore applies Redrive's rule itself when it finds such a message
// (reopened): a new retry window, unless a delivery of the message may
// have taken effect longer ago than Config.KeyRetention, in which case it
// parks the message again with ReasonRetention, sending nothing, as
// Redrive would refuse it with ErrPastRetention. Only
// RedrivePastRetention sends such a message: River's tools cannot.

// isParkReason reports whether a record's outcome is a park reason: the
// message was parked by the dispatcher with this record.
func isParkReason(outcome string) bool {
	switch Reason(outcome) {
	case ReasonRefused, ReasonAttempts, ReasonAge, ReasonRetention, ReasonKeyConflict:
		return true
	}
	return false
}

// reopened returns the retry window of a message whose attempt (River's
// count, this turn included) is about to start under the record win. A
// record that parked the message, and that Redrive did not reset (Redrive
// makes the next attempt Base+1; a parked message's own attempts reach
// Base+1 at least, so River's retry makes it Base+2 or more), means that
// something other than Redrive made the message due: it gets Redrive's new
// window, or, past the key's retention, keeps its window, and the
// dispatcher's overdue check parks it again before any delivery.
//
// A message that Redrive reset and whose first delivery then died with its
// dispatcher (rescued by River, attempt Base+2, its record not yet
// rewritten) is reset again: its window starts at the rescue, which costs
// it nothing but the rescued attempt's count.
func (s *settings) reopened(id int64, win record, attempt int) record {
	if !isParkReason(win.Outcome) || attempt <= win.Base+1 {
		return win
	}
	rec, err := s.redriven(id, win, attempt-1, false)
	if err != nil { // ErrPastRetention: overdue parks it again, for that reason
		win.Base = attempt - 1
		return win
	}
	return rec
}
