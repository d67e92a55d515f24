// Package docs has no code: its tests keep the repository's documents true
// to the repository. They live here, not beside one package, because a
// document such as BENCHMARKS.md cites commands, programs and benchmark
// functions of many packages at once. They hold README.md to its length,
// its Go snippets to the compiled files of internal/docs/tour, every
// Markdown document's relative links to files and headings that exist,
// and BENCHMARKS.md to its shape.
package docs
