package trace

import "github.com/google/uuid"

func short(u uuid.UUID) string { return u.String()[:8] }
