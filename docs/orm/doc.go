// Package orm holds the recipes of docs/database-sql.md: how GORM, sqlx,
// bun, ent and sqlc put their writes in the transaction of an idempotent
// request, each a few lines, compiled and run by its tests against a real
// Postgres. It is a module of its own, so that the ORMs stay out of idem's
// go.mod.
package orm
