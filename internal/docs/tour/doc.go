// Package tour is the code that README.md shows: each file of it but this
// one and its tests is a snippet of the README, from its import block to
// its end, and internal/docs's TestReadmeSnippetsAreCompiled holds the two
// equal. Its tests run the snippets (the server and the outbox on the
// Postgres that DATABASE_URL names), so that the README's tour compiles
// and works.
package tour
