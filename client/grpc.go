package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/api/idgen/v1/idgenv1connect"
	"github.com/idgen/idgen/segment"
)

// WithGRPC makes the client call the server's gRPC API instead of its
// HTTP API. Over an http:// base URL it speaks cleartext HTTP/2 (h2c), over
// https:// HTTP/2 over TLS. A client from WithHTTPClient is used as it is:
// its transport must speak HTTP/2 (http.Transport.Protocols).
func WithGRPC() Option { return func(c *Client) { c.grpc = true } }

// WithGRPCAddr is WithGRPC to the server's gRPC port at addr (host:port,
// idgen serve --grpc-addr), grpc-go's own transport, with the base URL's
// scheme: cleartext for http://, TLS for https://. The HTTP API's calls
// still go to the base URL.
func WithGRPCAddr(addr string) Option {
	return func(c *Client) { c.grpc, c.grpcAddr = true, addr }
}

// newRPCClient builds the connect clients of c's server, with an HTTP/2
// transport unless the caller brought one.
func newRPCClient(c *Client) (idgenv1connect.IDServiceClient, idgenv1connect.LockServiceClient) {
	hc := c.http
	if hc.Transport == nil {
		p := new(http.Protocols)
		p.SetHTTP2(true)
		p.SetUnencryptedHTTP2(true)
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Protocols = p
		cp := *hc
		cp.Transport = t
		hc = &cp
	}
	base := *c.base
	if c.grpcAddr != "" {
		base = url.URL{Scheme: c.base.Scheme, Host: c.grpcAddr}
	}
	return idgenv1connect.NewIDServiceClient(hc, base.String(), connect.WithGRPC()),
		idgenv1connect.NewLockServiceClient(hc, base.String(), connect.WithGRPC())
}

func rpcMode(mode string) idgenv1.Mode {
	switch mode {
	case "snowflake":
		return idgenv1.Mode_MODE_SNOWFLAKE
	case "segment":
		return idgenv1.Mode_MODE_SEGMENT
	}
	return idgenv1.Mode_MODE_UNSPECIFIED
}

// rpcNext asks for one ID (n 0) or n IDs of mode ("" for the server's).
func (c *Client) rpcNext(ctx context.Context, mode, tag string, n int) ([]int64, error) {
	if n > 1<<31-1 {
		return nil, fmt.Errorf("%w: n is above 2^31-1", ErrBadRequest)
	}
	hdr, err := idemHeader(ctx)
	if err != nil {
		return nil, err
	}
	req := connect.NewRequest(&idgenv1.NextRequest{Tag: tag, Count: int32(n), Mode: rpcMode(mode)}) //nolint:gosec // G115: bounded above
	c.authorize(req.Header())
	for k, v := range hdr { // the key, as metadata, on every retry
		req.Header()[k] = v
	}
	var ids []int64
	err = c.retry(ctx, func() (time.Duration, error) {
		resp, err := c.rpc.Next(ctx, req)
		if err != nil {
			return c.rpcFailure(ctx, err)
		}
		ids = resp.Msg.GetIds()
		return -1, nil
	})
	if err != nil {
		return nil, err
	}
	if want := max(n, 1); len(ids) != want {
		return nil, fmt.Errorf("client: server sent %d IDs, want %d", len(ids), want)
	}
	return ids, nil
}

func (c *Client) rpcReserve(ctx context.Context, tag string, size int64) (segment.Range, string, error) {
	req := connect.NewRequest(&idgenv1.ReserveRangeRequest{Tag: tag, Size: size})
	c.authorize(req.Header())
	var out *idgenv1.ReserveRangeResponse
	err := c.retry(ctx, func() (time.Duration, error) {
		resp, err := c.rpc.ReserveRange(ctx, req)
		if err != nil {
			return c.rpcFailure(ctx, err)
		}
		out = resp.Msg
		return -1, nil
	})
	if err != nil {
		return segment.Range{}, "", err
	}
	if out.GetEnd() <= out.GetStart() {
		return segment.Range{}, "", fmt.Errorf("client: server sent a bad range [%d, %d)", out.GetStart(), out.GetEnd())
	}
	return segment.Range{Start: out.GetStart(), End: out.GetEnd(), Step: size}, out.GetReleaseToken(), nil
}

// rpcRelease hands [from, end) of the range of tok back over gRPC.
func (c *Client) rpcRelease(ctx context.Context, tag, tok string, from int64) error {
	req := connect.NewRequest(&idgenv1.ReleaseRangeRequest{Tag: tag, ReleaseToken: tok, From: from})
	c.authorize(req.Header())
	return c.retry(ctx, func() (time.Duration, error) {
		if _, err := c.rpc.ReleaseRange(ctx, req); err != nil {
			return c.rpcFailure(ctx, err)
		}
		return -1, nil
	})
}

func (c *Client) authorize(h http.Header) {
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
}

// rpcFailure turns a failed call into an *Error as the HTTP transport
// makes them: the idgen code from the ErrorInfo detail and the HTTP
// status that goes with the gRPC code, so that errors.Is matches the same
// sentinels. wait is as for once: -1 when final, else the RetryInfo delay
// (0 without one).
func (c *Client) rpcFailure(ctx context.Context, err error) (wait time.Duration, _ error) {
	if ctx.Err() != nil {
		return -1, fmt.Errorf("client: %w", err)
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return 0, fmt.Errorf("%w: %w", segment.ErrUnavailable, err)
	}
	e := &Error{Status: httpStatus(ce.Code()), Code: "grpc_" + ce.Code().String(), Message: ce.Message()}
	for _, d := range ce.Details() {
		switch v, _ := d.Value(); v := v.(type) {
		case *errdetails.ErrorInfo:
			if v.GetDomain() == "idgen" {
				e.Code = v.GetReason()
				e.Holder = LockHolder{Owner: v.GetMetadata()["owner"], ExpiresAt: v.GetMetadata()["expires_at"]}
			}
		case *errdetails.RetryInfo:
			wait = min(v.GetRetryDelay().AsDuration(), c.maxBackoff)
		}
	}
	// A key whose first call is still running answers once it is done:
	// wait as for UNAVAILABLE.
	inFlight := ce.Code() == connect.CodeAborted && e.Code == "idempotency_key_in_flight"
	switch {
	case inFlight, e.Status == http.StatusServiceUnavailable, e.Status == http.StatusBadGateway, e.Status == http.StatusGatewayTimeout:
		return max(wait, 0), e
	}
	return -1, e
}

// httpStatus is the HTTP status of a gRPC code, as the Connect protocol
// maps them but for UNIMPLEMENTED.
func httpStatus(code connect.Code) int {
	switch code {
	case connect.CodeCanceled:
		return 499
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeOutOfRange:
		return http.StatusBadRequest
	case connect.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case connect.CodeNotFound:
		return http.StatusNotFound
	case connect.CodeAlreadyExists, connect.CodeAborted:
		return http.StatusConflict
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeResourceExhausted:
		return http.StatusTooManyRequests
	case connect.CodeUnimplemented:
		// The server's mode_disabled, which HTTP answers with 404.
		return http.StatusNotFound
	case connect.CodeUnavailable:
		return http.StatusServiceUnavailable
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	}
	return http.StatusInternalServerError
}
