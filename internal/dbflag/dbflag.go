// Package dbflag defines the -db flag of the repository's programs, so
// that every one of them has the same default: the DATABASE_URL
// environment variable, and when that is unset or empty, what the program
// does without a database (runs in memory, or refuses to start), which its
// usage states.
package dbflag

import "flag"

// Env is the environment variable that gives -db its default.
const Env = "DATABASE_URL"

// What an empty -db means, for Var's empty.
const (
	// Memory: the program keeps everything in memory.
	Memory = "everything in memory"
	// Required: the program needs a database and refuses to start.
	Required = "refused, a database is required"
)

// Var defines the -db flag on fs, stored in p: a Postgres URL whose
// default is getenv(Env); empty says what an empty value means to the
// program (Memory, Required, or its own words).
func Var(fs *flag.FlagSet, p *string, getenv func(string) string, empty string) {
	fs.StringVar(p, "db", getenv(Env), "Postgres `URL`; default $"+Env+"; empty: "+empty)
}
