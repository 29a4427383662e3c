package httpapi

import (
	"net/http"
	"slices"
	"strings"

	"github.com/floodgate/floodgate/internal/ratelimitheader"
)

// CORSMaxAge is how long, in seconds, a browser may cache a preflight's
// answer.
const CORSMaxAge = "600"

// cors answers CORS for the configured origins. A nil *cors is CORS off:
// browsers on other origins can neither read an answer nor send JSON.
type cors struct {
	any     bool
	origins []string
}

func newCORS(origins []string) *cors {
	var c cors
	for _, o := range origins {
		switch o = strings.TrimSpace(o); o {
		case "":
		case "*":
			c.any = true
		default:
			c.origins = append(c.origins, strings.TrimSuffix(o, "/"))
		}
	}
	if !c.any && len(c.origins) == 0 {
		return nil
	}
	return &c
}

// exposed are the answer headers a browser script may read.
var exposed = strings.Join([]string{
	ratelimitheader.PolicyName, ratelimitheader.RateLimitName,
	ratelimitheader.XLimitName, ratelimitheader.XRemainingName, ratelimitheader.XResetName,
	ratelimitheader.RetryAfterName, ratelimitheader.DegradedName, ratelimitheader.WarningName,
}, ", ")

// handle writes the CORS headers of an allowed origin, and answers a
// preflight, returning true then. Tokens travel in a header, never
// cookies, so credentials are not allowed.
func (c *cors) handle(w http.ResponseWriter, r *http.Request) bool {
	if c == nil {
		return false
	}
	hd := w.Header()
	hd.Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	allowed := c.allows(origin)
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	if allowed {
		hd.Set("Access-Control-Allow-Origin", origin)
		hd.Set("Access-Control-Expose-Headers", exposed)
	}
	if !preflight {
		return false
	}
	if allowed {
		hd.Set("Access-Control-Allow-Methods", http.MethodPost)
		hd.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
		hd.Set("Access-Control-Max-Age", CORSMaxAge)
	}
	w.WriteHeader(http.StatusNoContent)
	return true
}

// allows reports whether origin may call the API.
func (c *cors) allows(origin string) bool {
	return c != nil && origin != "" && (c.any || slices.Contains(c.origins, origin))
}
