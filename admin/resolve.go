package admin

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/idemkit/idem/server"
)

// confirmResolve shows the form that resolves an uncertain operation.
func (h *handler) confirmResolve(w http.ResponseWriter, r *http.Request) {
	op := scopeOf(r.URL.Query())
	rec, err := h.cfg.Records.Lookup(r.Context(), op, false)
	if err != nil || !h.cfg.AllowWrites || rec.State != "uncertain" {
		h.renderRecord(w, r, op, rec, err, false, "")
		return
	}
	h.render(w, r, http.StatusOK, "resolve.html", "Resolve "+op.Key, keyData{Op: op, Record: rec, Found: true})
}

// resolve settles an uncertain operation from the form: applied, with
// the response every later retry replays, or not applied.
func (h *handler) resolve(w http.ResponseWriter, r *http.Request) {
	scope, err := url.ParseQuery(r.PostForm.Get("scope"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "The form's scope field is not a query string: reload the record's page and try again.")
		return
	}
	op := scopeOf(scope)
	res, err := resolutionOf(r.PostForm)
	if err == nil {
		var rec server.Record
		rec, err = h.cfg.Records.Resolve(r.Context(), op, res)
		if errors.Is(err, server.ErrNotUncertain) {
			h.renderRecord(w, r, op, rec, nil, false, err.Error())
			return
		}
	}
	if err != nil {
		h.renderErr(w, r, http.StatusBadRequest, "error.html", "Not resolved", nil, err.Error())
		return
	}
	h.cfg.Logger.WarnContext(r.Context(), "admin: uncertain operation resolved through the admin page", "tenant", op.Tenant,
		"principal", op.Principal, "route", op.Route, "key", op.Key, "applied", res.Applied, "by", res.By,
		"reason", res.Reason, "remote", r.RemoteAddr)
	http.Redirect(w, r, h.cfg.Prefix+"/key?"+scopeQuery(op)+"&notice=resolved", http.StatusSeeOther)
}

// resolutionOf reads the form: outcome "applied" (with status,
// content_type and body) or "not-applied", by and reason. The Operator
// checks the rest.
func resolutionOf(form url.Values) (server.Resolution, error) {
	res := server.Resolution{By: form.Get("by"), Reason: form.Get("reason")}
	switch form.Get("outcome") {
	case "applied":
		status, err := strconv.Atoi(strings.TrimSpace(form.Get("status")))
		if err != nil {
			return res, errors.New("an applied operation needs the status of the response every retry will get")
		}
		res.Applied = true
		res.Response = &server.Response{Status: status, Header: http.Header{}, Body: []byte(form.Get("body"))}
		if ct := strings.TrimSpace(form.Get("content_type")); ct != "" {
			res.Response.Header.Set("Content-Type", ct)
		}
	case "not-applied":
	default:
		return res, errors.New("choose whether the operation was applied or not")
	}
	return res, nil
}
