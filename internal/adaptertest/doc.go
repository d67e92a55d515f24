// Package adaptertest holds the framework adapters (ginidem, echoidem,
// echo5idem) to one contract: each adapter's tests build the same sample
// API on their framework ([Build]) and hand it to [Conformance], which
// runs every check of internal/conformance (idemcheck's engine) on
// Postgres in Transactional and in Leased mode, and to the hazards the
// adapters exist for: [ErrorNotStored] (a failure the framework renders is
// never stored as a success), [Duplicates] (concurrent duplicates make one
// effect) and [Crash] (a process killed between the handler's return and
// the commit leaves no effect, and the retry makes one). Crash runs the
// API in a child process: the adapter's TestMain must call [Main].
package adaptertest
