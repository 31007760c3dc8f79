package server

import (
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/grpc/codes"
)

// Each of gRPC's 16 error codes is paired once, with the code of the same
// meaning in the other package: both are gRPC's wire numbers, which is
// what a client of either transport reads.
func TestRPCCodes_PairEveryCodeOnce(t *testing.T) {
	t.Parallel()
	seen := map[connect.Code]bool{}
	for _, r := range rpcCodes {
		if seen[r.connect] {
			t.Errorf("%v paired twice", r.connect)
		}
		seen[r.connect] = true
		if uint32(r.connect) != uint32(r.grpc) {
			t.Errorf("%v is paired with %v", r.connect, r.grpc)
		}
		if connectCodeOf(r.grpc) != r.connect || grpcCodeOf(r.connect) != r.grpc {
			t.Errorf("%v and %v do not convert into each other", r.connect, r.grpc)
		}
	}
	if len(seen) != 16 {
		t.Errorf("%d codes paired, want 16", len(seen))
	}
	if connectCodeOf(codes.OK) != 0 {
		t.Error("OK is not success")
	}
}

func TestErrorTable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ae   *apiError
		want rpcCode
	}{
		{errModeDisabled, rpcUnimplemented},
		{errReleaseDisabled, rpcUnimplemented},
		{errRangeNotReleased, rpcFailedPrecondition},
		{errInvalidCount, rpcInvalidArgument},
		{errNotFound, rpcNotFound},
		{errNotReady, rpcUnavailable},
		{errInternal, rpcInternal},
		{errMethodNotAllowed, rpcInternal},
		{&apiError{http.StatusConflict, "idempotency_key_in_flight", ""}, rpcAborted},
		{&apiError{http.StatusConflict, "something_else", ""}, rpcAlreadyExists},
	} {
		if got := rpcCodeOf(tc.ae); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.ae.code, got, tc.want)
		}
	}
}
