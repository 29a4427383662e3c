package client_test

import (
	"context"
	"net"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/internal/floodgatetest"
)

// rawConn is a plain gRPC connection to addr.
func rawConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestNewWithToken: New on an existing connection sends
// WithToken's token.
func TestNewWithToken(t *testing.T) {
	addr := floodgatetest.StartAuth(t, "s3cret")
	c, err := client.New(rawConn(t, addr), client.WithToken("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := c.Check(context.Background(), client.Request{Key: "k", Limit: perMinute3}); err != nil || !d.Allowed {
		t.Fatalf("got %+v, %v, want allowed", d, err)
	}
	if _, err := c.CheckBatch(context.Background(), client.Request{Key: "k", Limit: perMinute3}); err != nil {
		t.Fatalf("batch: %v", err)
	}
	if _, err := c.Peek(context.Background(), client.Request{Key: "k", Limit: perMinute3}); err != nil {
		t.Fatalf("peek: %v", err)
	}

	// Over plaintext to a name that is not loopback, gRPC refuses to send
	// the token in the clear.
	_, port, _ := net.SplitHostPort(addr)
	remote, err := grpc.NewClient("passthrough:///floodgate.test:"+port,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { remote.Close() })
	c, err = client.New(remote, client.WithToken("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Check(context.Background(), client.Request{Key: "k", Limit: perMinute3}); status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "insecure") {
		t.Fatalf("token over plaintext to a non-loopback target: got %v, want Unauthenticated (insecure connection)", err)
	}
}

// TestEmptyToken: an empty token is an error, to New
// and to Dial, rather than silently no token. (That New takes no option it
// cannot apply is a matter of types: TestNewTakesNoDialOptions.)
func TestEmptyToken(t *testing.T) {
	conn := rawConn(t, floodgatetest.DeadAddr(t))
	if c, err := client.New(conn, client.WithToken("")); err == nil || !strings.Contains(err.Error(), "empty token") {
		t.Errorf("New with an empty token: got %v, %v, want an error mentioning %q", c, err, "empty token")
	}
	if c, err := client.Dial(floodgatetest.DeadAddr(t), client.WithToken("")); err == nil || !strings.Contains(err.Error(), "empty token") {
		t.Errorf("Dial with an empty token: got %v, %v, want an error", c, err)
	}
	if _, err := client.New(conn, client.WithTimeout(0), client.WithToken("t")); err != nil {
		t.Errorf("New with a timeout and a token: %v", err)
	}
}

// TestNewTakesNoDialOptions: the options only Dial can apply
// (WithTLS, WithDialOptions) are of a type New does not accept, so passing
// one to New does not compile instead of failing, or being dropped, at run
// time; the options both apply (WithToken, WithTimeout) fit both.
func TestNewTakesNoDialOptions(t *testing.T) {
	newOpt := reflect.TypeOf(client.New).In(1).Elem()
	dialOpt := reflect.TypeOf(client.Dial).In(1).Elem()
	for name, f := range map[string]any{"WithTLS": client.WithTLS, "WithDialOptions": client.WithDialOptions} {
		got := reflect.TypeOf(f).Out(0)
		if got.AssignableTo(newOpt) {
			t.Errorf("%s returns %v, which New accepts; want a Dial-only type", name, got)
		}
		if !got.AssignableTo(dialOpt) {
			t.Errorf("%s returns %v, which Dial does not accept", name, got)
		}
	}
	for name, f := range map[string]any{"WithToken": client.WithToken, "WithTimeout": client.WithTimeout} {
		if got := reflect.TypeOf(f).Out(0); !got.AssignableTo(newOpt) || !got.AssignableTo(dialOpt) {
			t.Errorf("%s returns %v, want a type both New and Dial accept", name, got)
		}
	}
}
