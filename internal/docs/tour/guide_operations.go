package tour

import (
	"net/http"

	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/server"
)

// GuideAdminPage is docs/operations.md's admin page: the records and the
// outbox, behind the service's own operator authentication.
func GuideAdminPage(mux *http.ServeMux, store server.RecordStore, cfg server.Config, ob *outbox.Outbox, yourOperatorAuth func(http.Handler) http.Handler) {
	ops := server.NewOperator(store, server.OperatorConfig{ReplayHeaders: cfg.ReplayHeaders})
	page := admin.Handler(admin.Config{Records: ops, Outbox: ob, Prefix: "/admin", AllowWrites: true})
	mux.Handle("/admin/", yourOperatorAuth(page))
}
