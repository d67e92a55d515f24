// Package tour is the code that README.md and the guides in docs/ show.
// Each file of it but this one, the guide_ files and its tests is a
// snippet of the README, from its import block to its end; each function
// of a guide_ file is a snippet of a guide (its body, or all of it for a
// Test function), and package mystore stands for the reader's own store.
// internal/docs's TestReadmeSnippetsAreCompiled holds each snippet equal
// to its code. Its tests run the README's snippets (the server and the
// outbox on the Postgres that DATABASE_URL names), so that the README's
// tour compiles and works; the guides' snippets are compiled.
package tour
