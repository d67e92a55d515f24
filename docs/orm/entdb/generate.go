package entdb

//go:generate go run -mod=mod entgo.io/ent/cmd/ent generate --target . ./schema
