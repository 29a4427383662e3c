package httplimit_test

import (
	"log/slog"
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/httplimit"
	"github.com/floodgate/floodgate/client/internal/floodgatetest"
	"github.com/floodgate/floodgate/internal/rules"
)

// TestMiddlewareMissingToken: a middleware whose client
// lacks the token the server requires is not silently unlimited, even in
// the default FailOpen mode: every request is refused 500, OnError hears
// each, and the log has it once.
func TestMiddlewareMissingToken(t *testing.T) {
	addr := floodgatetest.StartAuth(t, "s3cret")
	var logged floodgatetest.LogCounter
	var errs floodgatetest.ErrorLog
	h := httplimit.Middleware(floodgatetest.Dial(t, addr), httplimit.Config{
		Limit:   perMinute3,
		Logger:  slog.New(&logged),
		OnError: func(_ *http.Request, err error) { errs.Add(err) },
	})(ok)
	for i := range 5 {
		wantResponse(t, "request "+string(rune('1'+i)), get(h, "192.0.2.1:1"), 500, nil, `{"error":"rate_limiter_misconfigured"}`+"\n")
	}
	if got := errs.Codes(); len(got) != 5 || got[0] != codes.Unauthenticated {
		t.Fatalf("OnError saw %v, want five Unauthenticated", got)
	}
	logged.WantLogged(t, 1, "Unauthenticated")
}

// TestMisconfigLoggedOncePerEpisode: an unknown policy is refused (not
// served open) and logged once; after the policy appears and a decision
// succeeds, a new episode is logged again.
func TestMisconfigLoggedOncePerEpisode(t *testing.T) {
	parse := func(yaml string) *rules.Set {
		cfg, err := rules.Parse("policies.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	without, with := parse("policies:\n  other: {requests_per_min: 60}\n"), parse("policies:\n  free: {requests_per_min: 60}\n")
	var src floodgatetest.Switch
	src.Store(without)
	addr, _ := floodgatetest.Start(t, &src)
	var logged floodgatetest.LogCounter
	h := httplimit.Middleware(floodgatetest.Dial(t, addr), httplimit.Config{Limit: client.Policy("free"), Logger: slog.New(&logged)})(ok)

	for _, step := range []struct {
		cfg  *rules.Set
		want int
		logs int64
	}{
		{without, 500, 1}, {without, 500, 1}, {without, 500, 1},
		{with, 200, 1},
		{without, 500, 2}, {without, 500, 2},
	} {
		src.Store(step.cfg)
		if got := get(h, "192.0.2.1:1").Code; got != step.want {
			t.Fatalf("got %d, want %d", got, step.want)
		}
		logged.WantLogged(t, step.logs, "NotFound")
	}
}
