package middleware

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/idgen/idgen/idempotency"
)

// Procedure names a unary procedure whose answers the interceptor may
// record, with how to rebuild its response message on replay: a
// recorded response is protobuf bytes, and connect needs the typed
// *connect.Response back. Build one with Replays.
type Procedure struct {
	name   string
	decode func([]byte) (connect.AnyResponse, error)
}

// Replays is the Procedure of name (as "/pkg.Service/Method") whose
// response message is Res.
func Replays[Res any, PRes interface {
	*Res
	proto.Message
}](name string) Procedure {
	return Procedure{name: name, decode: func(b []byte) (connect.AnyResponse, error) {
		msg := PRes(new(Res))
		if err := proto.Unmarshal(b, msg); err != nil {
			return nil, err
		}
		return connect.NewResponse((*Res)(msg)), nil
	}}
}

// Connect returns a connect-go interceptor for handlers: a unary call of
// one of procs that carries Idempotency-Key metadata runs once per key,
// and repeats get its response message and chosen headers back, with
// Idempotent-Replayed: true. The fingerprint is the procedure and the
// request message's deterministic encoding. A key on a procedure not
// in procs (streams included) is refused with INVALID_ARGUMENT rather
// than ignored. A call that returns an error is not recorded. The
// caller's scope comes from Options.ConnectScope.
func (m *Middleware) Connect(procs ...Procedure) connect.Interceptor {
	byName := make(map[string]Procedure, len(procs))
	for _, p := range procs {
		byName[p.name] = p
	}
	return &interceptor{m: m, procs: byName}
}

type interceptor struct {
	m     *Middleware
	procs map[string]Procedure
}

func (i *interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		keys := req.Header()[idempotency.KeyHeader]
		if req.Spec().IsClient || keys == nil {
			return next(ctx, req)
		}
		p, ok := i.procs[req.Spec().Procedure]
		if !ok {
			return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("idempotency_not_supported: this procedure keeps no idempotency keys; drop the Idempotency-Key metadata"))
		}
		r, err := i.request(ctx, req, keys)
		if err != nil {
			return nil, rpcError(err)
		}
		// The handler's own errors (and ours about its response) pass
		// through as they are, the key freed; the others are the
		// protocol's.
		var resp connect.AnyResponse
		var handlerErr error
		ans, replayed, err := i.m.k.Do(ctx, r, func(ctx context.Context) (idempotency.Answer, error) {
			resp, handlerErr = next(ctx, req)
			if handlerErr != nil {
				return idempotency.Answer{}, handlerErr
			}
			var a idempotency.Answer
			a, handlerErr = i.answer(resp)
			return a, handlerErr
		})
		switch {
		case handlerErr != nil:
			return nil, handlerErr
		case err != nil:
			return nil, rpcError(err)
		case replayed:
			return i.replay(p, ans)
		}
		return resp, nil
	}
}

// answer encodes a response as a recorded answer: its chosen headers
// and its message's deterministic encoding.
func (i *interceptor) answer(resp connect.AnyResponse) (idempotency.Answer, error) {
	msg, ok := resp.Any().(proto.Message)
	if !ok {
		return idempotency.Answer{}, connect.NewError(connect.CodeInternal, errors.New("middleware: the response is not a protobuf message"))
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return idempotency.Answer{}, connect.NewError(connect.CodeInternal, err)
	}
	rec := newRecorder()
	for k, v := range resp.Header() {
		rec.header[k] = v
	}
	_, _ = rec.body.Write(b)
	return i.m.answer(rec)
}

func (i *interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if conn.RequestHeader()[idempotency.KeyHeader] != nil {
			return connect.NewError(connect.CodeInvalidArgument, errors.New("idempotency_not_supported: a stream keeps no idempotency keys; drop the Idempotency-Key metadata"))
		}
		return next(ctx, conn)
	}
}

func (i *interceptor) request(ctx context.Context, req connect.AnyRequest, keys []string) (idempotency.Request, error) {
	var r idempotency.Request
	if len(keys) != 1 {
		return r, fmt.Errorf("%w: send one %s, not several", idempotency.ErrInvalidKey, idempotency.KeyHeader)
	}
	key, err := idempotency.ParseKey(keys[0])
	if err != nil {
		return r, err
	}
	ttl, err := i.m.k.ParseTTL(req.Header().Get(idempotency.TTLHeader))
	if err != nil {
		return r, err
	}
	scope := idempotency.AnonymousScope
	if f := i.m.opts.ConnectScope; f != nil {
		if scope, err = f(ctx, req.Header()); err != nil {
			return r, fmt.Errorf("%w: %w", errNoScope, err)
		}
	}
	msg, ok := req.Any().(proto.Message)
	if !ok {
		return r, fmt.Errorf("%w: the request is not a protobuf message", errBody)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return r, fmt.Errorf("%w: %w", errBody, err)
	}
	return idempotency.Request{Scope: scope, Key: key, TTL: ttl,
		Fingerprint: idempotency.Fingerprint("connect", req.Spec().Procedure, string(b))}, nil
}

func (i *interceptor) replay(p Procedure, a idempotency.Answer) (connect.AnyResponse, error) {
	h, body, err := decodeAnswer(a)
	if err != nil {
		return nil, rpcError(err)
	}
	resp, err := p.decode(body)
	if err != nil {
		return nil, rpcError(fmt.Errorf("%w: a recorded answer is not this procedure's: %w", idempotency.ErrStore, err))
	}
	for k, v := range h {
		resp.Header()[k] = v
	}
	resp.Header().Set(idempotency.ReplayedHeader, "true")
	return resp, nil
}

// rpcError maps an error to the gRPC codes idgen's own RPCs use, with
// the stable code leading the message.
func rpcError(err error) error {
	status, code, msg, _ := problem(err)
	c := connect.CodeUnavailable
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		c = connect.CodeInvalidArgument
	case http.StatusUnauthorized:
		c = connect.CodeUnauthenticated
	case http.StatusUnprocessableEntity:
		c = connect.CodeFailedPrecondition
	case http.StatusConflict:
		c = connect.CodeAborted
	case http.StatusTooManyRequests:
		c = connect.CodeResourceExhausted
	}
	return connect.NewError(c, errors.New(code+": "+msg))
}
