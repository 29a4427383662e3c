package redisstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/store/redisstore"
)

// TestNewClientPasswordNeedsEscape: a password holding /, ? or #
// written as it is ends the URL's user information early for the URL
// parser, which then reads a part of the password as the host's port,
// the path (the database), the query or a fragment. NewClient refuses
// every such URL, and its error shows no part of the password.
func TestNewClientPasswordNeedsEscape(t *testing.T) {
	const head, tail = "s3cr3tpa55", "t4ilpa55"
	for _, sep := range []string{"/", "?", "#"} {
		for _, pw := range []string{head + sep + tail, "6380" + sep + tail, head + "@x" + sep + tail} {
			for _, mode := range []string{"", redisstore.ModeCluster, redisstore.ModeSentinel} {
				for _, raw := range []string{"redis://u:" + pw + "@localhost:6379", "redis://:" + pw + "@localhost:6379/0"} {
					c, err := redisstore.NewClient(redisstore.ClientConfig{URL: raw, Mode: mode, SentinelMaster: "m"})
					if err == nil {
						_ = c.Close()
						t.Errorf("%s, mode %q: nil error", raw, mode)
						continue
					}
					if !errors.Is(err, redisstore.ErrClientConfig) {
						t.Errorf("error %v does not wrap ErrClientConfig", err)
					}
					for _, part := range []string{head, tail, "6380"} {
						if strings.Contains(err.Error(), part) {
							t.Errorf("%s, mode %q: error %q shows the password's %q", raw, mode, err, part)
						}
					}
				}
			}
		}
	}
}
