// Package docs has no code: its tests keep the repository's documents true
// to the repository. They live here, not beside one package, because a
// document such as BENCHMARKS.md cites commands, programs and benchmark
// functions of many packages at once.
package docs
