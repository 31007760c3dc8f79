package server

import (
	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/grpc/codes"
)

// Every answer the service decides is an apiError (classify, errors.go):
// an HTTP status and a stable idgen code, from api/errcode's table or the
// server's own errors. errorTable below is the one place that says what
// such an answer is on the gRPC transports, connect-go's and grpc-go's
// alike, so neither converts the other's codes.

// rpcCode is one gRPC status code as each transport's package spells it.
type rpcCode struct {
	connect connect.Code
	grpc    codes.Code
}

// errorRow maps an answer to its gRPC code: by its idgen code when code
// is set, else by its HTTP status.
type errorRow struct {
	code   string
	status int
	rpc    rpcCode
}

// The gRPC codes of the answers.
var (
	rpcInvalidArgument    = rpcCode{connect.CodeInvalidArgument, codes.InvalidArgument}
	rpcUnauthenticated    = rpcCode{connect.CodeUnauthenticated, codes.Unauthenticated}
	rpcPermissionDenied   = rpcCode{connect.CodePermissionDenied, codes.PermissionDenied}
	rpcNotFound           = rpcCode{connect.CodeNotFound, codes.NotFound}
	rpcAlreadyExists      = rpcCode{connect.CodeAlreadyExists, codes.AlreadyExists}
	rpcUnavailable        = rpcCode{connect.CodeUnavailable, codes.Unavailable}
	rpcUnimplemented      = rpcCode{connect.CodeUnimplemented, codes.Unimplemented}
	rpcResourceExhausted  = rpcCode{connect.CodeResourceExhausted, codes.ResourceExhausted}
	rpcFailedPrecondition = rpcCode{connect.CodeFailedPrecondition, codes.FailedPrecondition}
	rpcAborted            = rpcCode{connect.CodeAborted, codes.Aborted}
	rpcInternal           = rpcCode{connect.CodeInternal, codes.Internal}
)

// errorTable is the gRPC code of every answer: the rows by idgen code,
// where gRPC has a code that says more than the HTTP status, come first;
// an answer no row matches (a 5xx other than 503) is INTERNAL.
var errorTable = []errorRow{
	// Not enabled on this server, as gRPC defines UNIMPLEMENTED: a
	// client can tell it from a mistake of its own without the detail.
	{code: "mode_disabled", rpc: rpcUnimplemented},
	{code: "idempotency_disabled", rpc: rpcUnimplemented},
	{code: "release_disabled", rpc: rpcUnimplemented},
	{code: "locks_disabled", rpc: rpcUnimplemented},
	{code: "lock_limit_reached", rpc: rpcResourceExhausted},
	{code: "tag_limit_reached", rpc: rpcResourceExhausted},
	{code: "idempotency_key_limit_reached", rpc: rpcResourceExhausted},
	// Asking again does not help: an operator must act (a new tag or
	// epoch), or the caller must send a new key or, for an opaque tag, ask
	// for IDs instead of a range. (HTTP's 409 would read as
	// ALREADY_EXISTS, which names a different mistake.)
	{code: "tag_exhausted", rpc: rpcFailedPrecondition},
	{code: "time_exhausted", rpc: rpcFailedPrecondition},
	{code: "idempotency_key_reused", rpc: rpcFailedPrecondition},
	{code: "opaque_tag_range", rpc: rpcFailedPrecondition},
	{code: "range_not_released", rpc: rpcFailedPrecondition},
	{code: "opaque_key_conflict", rpc: rpcFailedPrecondition},
	// A concurrency conflict the caller retries after RetryInfo.
	{code: "idempotency_key_in_flight", rpc: rpcAborted},
	// Another owner holds the lock: a conflict of concurrent callers,
	// which asking again later, or with a wait, may resolve.
	{code: "lock_held", rpc: rpcAborted},
	// The grant named is not the lock's: the caller's own state is stale.
	{code: "lock_lost", rpc: rpcFailedPrecondition},
	{code: "lock_not_held", rpc: rpcFailedPrecondition},

	{status: http.StatusBadRequest, rpc: rpcInvalidArgument},
	{status: http.StatusUnauthorized, rpc: rpcUnauthenticated},
	{status: http.StatusForbidden, rpc: rpcPermissionDenied},
	{status: http.StatusNotFound, rpc: rpcNotFound},
	{status: http.StatusConflict, rpc: rpcAlreadyExists},
	{status: http.StatusServiceUnavailable, rpc: rpcUnavailable},
}

// rpcCodeOf is ae's gRPC code, from errorTable.
func rpcCodeOf(ae *apiError) rpcCode {
	for _, r := range errorTable {
		if r.code != "" && r.code == ae.code {
			return r.rpc
		}
	}
	for _, r := range errorTable {
		if r.code == "" && r.status == ae.status {
			return r.rpc
		}
	}
	return rpcInternal
}

// rpcCodes pairs every gRPC error code as the two packages spell it, for
// statuses one transport's package made (a cancelled call, a message too
// large, the health service's NOT_FOUND) that the other's must name: the
// access log and the metrics name codes as connect-go does.
var rpcCodes = [...]rpcCode{
	{connect.CodeCanceled, codes.Canceled},
	{connect.CodeUnknown, codes.Unknown},
	rpcInvalidArgument,
	{connect.CodeDeadlineExceeded, codes.DeadlineExceeded},
	rpcNotFound,
	rpcAlreadyExists,
	rpcPermissionDenied,
	rpcResourceExhausted,
	rpcFailedPrecondition,
	rpcAborted,
	{connect.CodeOutOfRange, codes.OutOfRange},
	rpcUnimplemented,
	rpcInternal,
	rpcUnavailable,
	{connect.CodeDataLoss, codes.DataLoss},
	rpcUnauthenticated,
}

// grpcCodeOf is c as grpc-go spells it.
func grpcCodeOf(c connect.Code) codes.Code {
	for _, r := range rpcCodes {
		if r.connect == c {
			return r.grpc
		}
	}
	return codes.Unknown
}

// connectCodeOf is c as connect-go spells it; 0 for OK, as rpcStatus
// reports success.
func connectCodeOf(c codes.Code) connect.Code {
	for _, r := range rpcCodes {
		if r.grpc == c {
			return r.connect
		}
	}
	if c == codes.OK {
		return 0
	}
	return connect.CodeUnknown
}
