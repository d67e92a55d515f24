package main

import (
	"strings"
	"testing"
	"time"
)

// Every flag that would measure nothing or print a wrong figure is
// refused, with its name in the error.
func TestCheckRefusesBadFlags(t *testing.T) {
	good := options{mode: "latency", rounds: 1, concurrency: 1, rate: 500, seconds: time.Second}
	if err := good.check(); err != nil {
		t.Fatalf("good flags refused: %v", err)
	}
	for _, tc := range []struct {
		edit func(*options)
		want string
	}{
		{func(o *options) { o.mode = "latncy" }, "-mode"},
		{func(o *options) { o.mode = "migrate" }, "-schema"},
		{func(o *options) { o.n = -1 }, "-n "},
		{func(o *options) { o.rounds = 0 }, "-rounds"},
		{func(o *options) { o.mode, o.concurrency = "payments", 0 }, "-concurrency"},
		{func(o *options) { o.dispatcher = -1 }, "-dispatchers"},
		{func(o *options) { o.rate = 0 }, "-rate"},
		{func(o *options) { o.cooldown = -time.Millisecond }, "-fetch-cooldown"},
		{func(o *options) { o.ginLimit = 32 }, "-gin-pending-limit"},
		{func(o *options) { o.seconds = time.Millisecond }, "-duration"},
		{func(o *options) { o.mode, o.seconds = "deadhost", 5*time.Second }, "-duration"},
		{func(o *options) { o.mode, o.seconds = "steady", 500*time.Millisecond }, "-duration"},
	} {
		o := good
		tc.edit(&o)
		err := o.check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one naming %s", o, err, tc.want)
		}
	}
}
