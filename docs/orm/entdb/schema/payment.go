// Package schema is the ent schema of the recipes' payments table
// (sqlcdb/schema.sql); package entdb is generated from it.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"
)

// Payment holds the schema definition for the Payment entity.
type Payment struct {
	ent.Schema
}

// Fields of the Payment.
func (Payment) Fields() []ent.Field {
	return []ent.Field{
		field.String("key"),
		field.Int64("amount"),
	}
}
