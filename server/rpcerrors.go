package server

import (
	"context"
	"errors"
	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo detail of every
// error the gRPC API decides; its reason is the stable idgen error code.
const ErrorDomain = "idgen"

// rpcFault is the gRPC status of a handler's error, whichever transport
// answers it: its code and message, the idgen code as ErrorInfo and, when
// retrying helps, a RetryInfo. A 5xx is logged under the request ID,
// which the caller gets in ErrorInfo's metadata and the X-Request-Id
// trailer.
type rpcFault struct {
	code      rpcCode
	message   string
	requestID string
	details   []proto.Message
}

func (s *Server) rpcFault(ctx context.Context, procedure string, h http.Header, err error) rpcFault {
	ae, retry := classify(err)
	rid := rpcRequestID(h)
	s.recordError(ctx, rid, procedure, ae, err)
	f := rpcFault{code: rpcCodeOf(ae), message: ae.message, requestID: rid,
		details: []proto.Message{&errdetails.ErrorInfo{Reason: ae.code, Domain: ErrorDomain, Metadata: map[string]string{"request_id": rid}}}}
	var held *lockHeldError
	if errors.As(err, &held) && held.admin {
		md := f.details[0].(*errdetails.ErrorInfo).Metadata
		md["owner"], md["expires_at"] = held.holder.Owner, timeOut(held.holder.Expires)
	}
	if retry {
		f.details = append(f.details, &errdetails.RetryInfo{RetryDelay: durationpb.New(retryDelay(err))})
	}
	return f
}

// rpcError is rpcFault as connect-go's error. Errors connect made itself
// pass unchanged.
func (s *Server) rpcError(ctx context.Context, procedure string, h http.Header, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	f := s.rpcFault(ctx, procedure, h, err)
	ce = connect.NewError(f.code.connect, errors.New(f.message))
	ce.Meta().Set(requestIDHeader, f.requestID)
	for _, m := range f.details {
		if d, e := connect.NewErrorDetail(m); e == nil {
			ce.AddDetail(d)
		}
	}
	return ce
}

// rpcRequestID is the caller's X-Request-Id metadata when it is sane, or
// a new one.
func rpcRequestID(h http.Header) string {
	if v := h[requestIDKey]; len(v) > 0 && saneRequestID(v[0]) {
		return v[0]
	}
	return newRequestID()
}

// connectRequestID is the request ID rpcError put in err, or "".
func connectRequestID(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Meta().Get(requestIDHeader)
	}
	return ""
}
