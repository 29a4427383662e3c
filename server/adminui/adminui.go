// Package adminui is the admin port's page at /: the heaviest denied keys
// of each rule with their charts, the rules in force and an explain box,
// drawn in the browser from GET /debug/limited, /debug/config and
// /debug/explain. Its HTML, CSS and JavaScript are embedded in the binary
// (no CDN, nothing to build) and served with a Content-Security-Policy
// that allows no inline script or style and no origin but the page's own:
// the keys it shows come from callers, and the script only ever writes
// them as text.
package adminui

import (
	"embed"
	"net/http"
)

//go:embed assets
var assets embed.FS

// ContentSecurityPolicy is the policy of every answer of Handler: scripts,
// styles and fetches from the page's own origin only, no inline script or
// style, no plugins, frames, forms posting elsewhere or base URL changes.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the page: GET / (exactly) and GET /ui/app.js and
// /ui/app.css. The caller puts it behind the admin endpoints' auth.
func Handler() http.Handler {
	mux := http.NewServeMux()
	serve := func(name, contentType string) http.HandlerFunc {
		body, err := assets.ReadFile("assets/" + name)
		if err != nil {
			panic("adminui: " + name + " is not embedded: " + err.Error()) // a build without its assets
		}
		return func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h.Set("Content-Type", contentType)
			h.Set("Content-Security-Policy", ContentSecurityPolicy)
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Referrer-Policy", "no-referrer")
			h.Set("X-Frame-Options", "DENY")
			h.Set("Cache-Control", "no-cache")
			_, _ = w.Write(body)
		}
	}
	mux.Handle("GET /{$}", serve("index.html", "text/html; charset=utf-8"))
	mux.Handle("GET /ui/app.js", serve("app.js", "text/javascript; charset=utf-8"))
	mux.Handle("GET /ui/app.css", serve("app.css", "text/css; charset=utf-8"))
	return mux
}
