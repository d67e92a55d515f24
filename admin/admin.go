// Package admin is an operator's web page for idem: an http.Handler that
// a service mounts in its own server, as it would River UI, to look up
// the record of a key, see the operations in flight (the stuck ones
// marked) and the outbox's parked messages, and, when allowed, evict a
// record, resolve an uncertain operation or re-drive a message.
//
//	ops := server.NewOperator(store, server.OperatorConfig{})
//	page := admin.Handler(admin.Config{Records: ops, Outbox: ob, Prefix: "/admin"})
//	mux.Handle("/admin/", requireOperator(page)) // the application's own authentication
//
// The page has no authentication of its own: mount it behind the
// application's, for operators only. Every record and message of every
// tenant is visible through it. It is read-only unless [Config.AllowWrites]
// is set; evict, resolve and re-drive are then POST forms, each refused without
// the form's token (see [Config.CSRFKey]) and, in browsers that say where a
// request comes from, from any other origin (net/http's
// CrossOriginProtection). Its pages are plain server-rendered HTML with
// one style sheet, no script, and a Content-Security-Policy that allows
// nothing else; they cannot be framed.
package admin

import (
	"context"
	"crypto/rand"
	"embed"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/server"
)

// Outbox is what the page needs of an outbox: *[outbox.Outbox] and
// *[outbox.Memory] have it.
type Outbox interface {
	Stats(ctx context.Context) (outbox.Stats, error)
	Parked(ctx context.Context, after int64, limit int) ([]outbox.ParkedMessage, error)
	Lookup(ctx context.Context, id int64) (outbox.MessageStatus, error)
	LookupKey(ctx context.Context, key string) (outbox.MessageStatus, error)
	Redrive(ctx context.Context, id int64) error
	RedrivePastRetention(ctx context.Context, id int64) error
}

var (
	_ Outbox = (*outbox.Outbox)(nil)
	_ Outbox = (*outbox.Memory)(nil)
)

// Config configures [Handler]. Records is required; the zero value of every
// other field is a read-only page at the root of its mux.
type Config struct {
	// Records is the operator of the idempotency records
	// ([server.NewOperator] over the service's store).
	Records *server.Operator
	// Outbox, when set, adds the outbox's messages: its counts, the
	// parked messages, a message by ID or key. Nil: no outbox pages.
	Outbox Outbox
	// AllowWrites shows and accepts the POST actions: evict a record and
	// re-drive a parked message. False: the page is read-only, and those
	// POSTs get 403.
	AllowWrites bool
	// Prefix is the path the page is mounted at, without a trailing slash
	// ("/admin"): mount the handler on Prefix + "/". Empty: the root.
	Prefix string
	// CSRFKey signs the forms' tokens; a form is accepted for an hour. Nil:
	// a random key per [Handler], so a form rendered by another process is
	// refused: give every node behind one load balancer the same key.
	CSRFKey []byte
	// Logger receives a record of every action taken through the page
	// (the [server.Operator] logs each eviction too). Nil: slog.Default().
	Logger *slog.Logger
}

//go:embed templates/*.html templates/style.css
var files embed.FS

var pages = template.Must(template.New("").Funcs(funcs).ParseFS(files, "templates/*.html"))

// handler is a resolved [Config].
type handler struct {
	cfg  Config
	csrf csrf
	now  func() time.Time
}

// Handler returns the admin page. It panics when cfg.Records is nil. It
// is safe for concurrent use; each request's context governs the store
// calls it makes.
func Handler(cfg Config) http.Handler {
	if cfg.Records == nil {
		panic("admin: Config.Records is nil: give it server.NewOperator(store, ...)")
	}
	cfg.Prefix = strings.TrimSuffix(cfg.Prefix, "/")
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	key := cfg.CSRFKey
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key) // never fails (crypto/rand)
	}
	h := &handler{cfg: cfg, csrf: csrf{key: key}, now: time.Now}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.overview)
	mux.HandleFunc("GET /key", h.key)
	mux.HandleFunc("GET /ref", h.ref)
	mux.HandleFunc("GET /evict", h.confirmEvict)
	mux.HandleFunc("GET /resolve", h.confirmResolve)
	mux.HandleFunc("GET /inflight", h.inflight)
	mux.HandleFunc("GET /parked", h.parked)
	mux.HandleFunc("GET /message", h.message)
	mux.HandleFunc("GET /style.css", style)
	cop := http.NewCrossOriginProtection()
	mux.Handle("POST /evict", cop.Handler(h.write(h.evict)))
	mux.Handle("POST /redrive", cop.Handler(h.write(h.redrive)))
	mux.Handle("POST /resolve", cop.Handler(h.write(h.resolve)))
	var root http.Handler = mux
	if cfg.Prefix != "" {
		root = http.StripPrefix(cfg.Prefix, mux)
	}
	return secured(root)
}

// secured sets the headers of every answer: no script, no framing, no
// caching of what the page shows.
func secured(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func style(w http.ResponseWriter, _ *http.Request) {
	css, _ := files.ReadFile("templates/style.css")
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	_, _ = w.Write(css)
}

// write guards a POST action: refused (403) when writes are off or the
// form's token is not this page's.
func (h *handler) write(action func(http.ResponseWriter, *http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !h.cfg.AllowWrites:
			h.fail(w, r, http.StatusForbidden, "This page is read-only: the service did not set admin.Config.AllowWrites.")
		case r.ParseForm() != nil || !h.csrf.valid(r.PostForm.Get("csrf"), h.now()):
			h.fail(w, r, http.StatusForbidden, "The form's token is missing, expired or not this page's: reload the page and try again.")
		default:
			action(w, r)
		}
	})
}

// view is what every template gets.
type view struct {
	Prefix      string
	Title       string
	Writes      bool
	HasOutbox   bool
	Notice, Err string
	CSRF        string
	Data        any
}

// render writes template name with data, with status.
func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	h.renderErr(w, r, status, name, title, data, "")
}

// renderErr is render with an error (msg, when not "") shown above the
// page.
func (h *handler) renderErr(w http.ResponseWriter, r *http.Request, status int, name, title string, data any, msg string) {
	v := view{Prefix: h.cfg.Prefix, Title: title, Writes: h.cfg.AllowWrites, HasOutbox: h.cfg.Outbox != nil,
		Notice: notices[r.URL.Query().Get("notice")], Err: msg, Data: data}
	if h.cfg.AllowWrites {
		v.CSRF = h.csrf.token(h.now())
	}
	h.send(w, r, status, name, v)
}

func (h *handler) send(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := pages.ExecuteTemplate(w, name, v); err != nil {
		h.cfg.Logger.ErrorContext(r.Context(), "admin: cannot render a page", "page", name, "error", err)
	}
}

// fail renders an error page.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.send(w, r, status, "error.html", view{Prefix: h.cfg.Prefix, Title: http.StatusText(status),
		Writes: h.cfg.AllowWrites, HasOutbox: h.cfg.Outbox != nil, Err: msg})
}

// notices are the messages a redirect after an action may show, by code:
// the URL carries only the code.
var notices = map[string]string{
	"evicted":  "The record was evicted: the next request with its key runs the handler again.",
	"redriven": "The message was re-driven: it is due again, with its key and a new retry window.",
	"resolved": "The uncertain operation was resolved: its retries now get what you said.",
}
