package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	idgenv1 "github.com/idgen/idgen/api/idgen/v1"
	"github.com/idgen/idgen/idempotency"
	"github.com/idgen/idgen/readable"
)

// The gRPC API (api/idgen/v1/idgen.proto) is one implementation, the
// rpc* methods of Server below, which take a message and the call's
// metadata as an http.Header, issue through the service (service.go) and
// return a message or an error, over two transports, each a thin
// adapter:
//
//   - connect-go handlers beside gin, on the same port and through the
//     same http.Server (connect.go): gRPC and gRPC-Web over HTTP/2
//     (cleartext or TLS) and HTTP/1.1, and the Connect protocol over
//     either. Requests whose path is /package.Service/… go to them
//     (isRPCPath); all others go to gin.
//   - grpc-go's own server and transport on a listener of its own
//     (grpcnative.go, idgen serve --grpc-addr), for gRPC clients: it
//     costs about a third of the CPU per call of gRPC through net/http's
//     HTTP/2 server (docs/grpc.md).
//
// Handlers return errors as the HTTP handlers do; each transport maps
// them through rpcFault (rpcerrors.go), with classify, the mapping HTTP
// uses, into a gRPC status with the idgen code in a
// google.rpc.ErrorInfo, so every API answers a mistake the same way.

var errInvalidMode = &apiError{http.StatusBadRequest, "invalid_mode", "mode must be MODE_UNSPECIFIED (the server's default), MODE_SEGMENT or MODE_SNOWFLAKE"}

// rpcNext is Next over either transport; h is the call's metadata.
// replayed says the answer is one recorded for its idempotency key.
func (s *Server) rpcNext(ctx context.Context, h http.Header, m *idgenv1.NextRequest) (_ *idgenv1.NextResponse, replayed bool, _ error) {
	tag := m.GetTag()
	if err := s.authorizeTag(h, tag); err != nil {
		return nil, false, err
	}
	var mode string
	switch m.GetMode() {
	case idgenv1.Mode_MODE_UNSPECIFIED:
		mode = s.cfg.Mode
	case idgenv1.Mode_MODE_SEGMENT:
		mode = ModeSegment
	case idgenv1.Mode_MODE_SNOWFLAKE:
		mode = ModeSnowflake
	default:
		return nil, false, errInvalidMode
	}
	g := s.gens[mode]
	if g == nil {
		return nil, false, errModeDisabled // before the checks of format and count, as over HTTP
	}
	format := formatNumeric
	switch m.GetFormat() {
	case idgenv1.Format_FORMAT_UNSPECIFIED, idgenv1.Format_FORMAT_NUMERIC:
	case idgenv1.Format_FORMAT_PREFIXED:
		format = formatPrefixed
	default:
		return nil, false, &apiError{http.StatusBadRequest, "invalid_format", "format must be FORMAT_NUMERIC (the default) or FORMAT_PREFIXED"}
	}
	n := m.GetCount()
	if n < 0 || int64(n) > int64(s.cfg.MaxBatch) {
		return nil, false, &apiError{http.StatusBadRequest, "invalid_count",
			"count must be 0 (one ID) or a whole number from 1 to " + strconv.Itoa(s.cfg.MaxBatch)}
	}
	r := keyedRequest{mode: mode, tag: tag, format: format, single: n == 0, n: int(n), rpc: true}
	var out *idgenv1.NextResponse
	var one [1]int64
	ids, ans, replayed, err := s.svc.next(ctx, g, r, h, one[:0], func(ids []int64) (idempotency.Answer, error) {
		// The NextResponse message itself is kept, so that a repeat over
		// any of the protocols (gRPC, gRPC-Web, Connect, grpc-go's
		// transport) gets the same message.
		var err error
		if out, err = nextResponse(r.tag, r.format, ids); err != nil {
			return idempotency.Answer{}, err
		}
		b, err := proto.Marshal(out)
		return idempotency.Answer{Status: http.StatusOK, ContentType: rpcAnswerType, Body: b}, err
	})
	switch {
	case err != nil:
		return nil, false, err
	case ans == nil:
		out, err = nextResponse(tag, format, ids)
		return out, false, err
	case !replayed:
		return out, false, nil
	}
	out, err = replayedResponse(*ans)
	return out, err == nil, err
}

// nextResponse is the answer to Next for ids.
func nextResponse(tag, format string, ids []int64) (*idgenv1.NextResponse, error) {
	out := &idgenv1.NextResponse{Tag: tag, Ids: ids}
	if format == formatPrefixed {
		out.PrefixedIds = make([]string, len(ids))
		for i, id := range ids {
			v, err := readable.Encode(tag, id)
			if err != nil {
				return nil, err
			}
			out.PrefixedIds[i] = v
		}
	}
	return out, nil
}

// rpcAnswerType is the content type of a recorded gRPC answer: a
// NextResponse in the protobuf wire format.
const rpcAnswerType = "application/proto; idgen.v1.NextResponse"

// replayedResponse is the NextResponse a gRPC key's answer recorded.
func replayedResponse(ans idempotency.Answer) (*idgenv1.NextResponse, error) {
	// The fingerprint names gRPC, so the row holds a message this server
	// (or one of its versions) recorded; anything else is a corrupt row.
	if ans.ContentType != rpcAnswerType {
		return nil, fmt.Errorf("idempotency: a gRPC key's recorded answer is %q", ans.ContentType)
	}
	out := new(idgenv1.NextResponse)
	if err := proto.Unmarshal(ans.Body, out); err != nil {
		return nil, fmt.Errorf("idempotency: a gRPC key's recorded answer: %w", err)
	}
	return out, nil
}

// rpcReserveRange is ReserveRange over either transport.
func (s *Server) rpcReserveRange(ctx context.Context, h http.Header, m *idgenv1.ReserveRangeRequest) (*idgenv1.ReserveRangeResponse, error) {
	if h[idempotency.KeyHeader] != nil {
		return nil, errIdemNotSupported
	}
	tag := m.GetTag()
	if err := s.authorizeTag(h, tag); err != nil {
		return nil, err
	}
	if s.cfg.Ranges == nil {
		return nil, errModeDisabled // before the check of size, as over HTTP
	}
	if m.GetSize() < 1 {
		return nil, s.errInvalidSize()
	}
	rg, err := s.svc.reserve(ctx, tag, m.GetSize())
	if err != nil {
		return nil, err
	}
	return &idgenv1.ReserveRangeResponse{Tag: tag, Start: rg.Start, End: rg.End, ReleaseToken: s.svc.releaseToken(tag, rg)}, nil
}

// rpcReleaseRange is ReleaseRange over either transport.
func (s *Server) rpcReleaseRange(ctx context.Context, h http.Header, m *idgenv1.ReleaseRangeRequest) (*idgenv1.ReleaseRangeResponse, error) {
	if h[idempotency.KeyHeader] != nil {
		return nil, errIdemNotSupported
	}
	tag := m.GetTag()
	if err := s.authorizeTag(h, tag); err != nil {
		return nil, err
	}
	if m.GetReleaseToken() == "" {
		return nil, errInvalidRelease
	}
	rg, err := s.svc.release(ctx, tag, m.GetReleaseToken(), m.GetFrom())
	if err != nil {
		return nil, err
	}
	return &idgenv1.ReleaseRangeResponse{Tag: tag, From: m.GetFrom(), End: rg.end}, nil
}

// rpcDecodeSnowflake is DecodeSnowflake over either transport.
func (s *Server) rpcDecodeSnowflake(m *idgenv1.DecodeSnowflakeRequest) (*idgenv1.DecodeSnowflakeResponse, error) {
	id := m.GetId()
	if id < 0 {
		return nil, errInvalidSnowflake
	}
	p, err := s.cfg.Layout.Decode(id)
	if err != nil {
		return nil, err
	}
	return &idgenv1.DecodeSnowflakeResponse{Id: id, Time: timestamppb.New(p.Time),
		UnixMs: p.Time.UnixMilli(), WorkerId: p.WorkerID, Sequence: p.Sequence}, nil
}

// rpcDecodeReadable is DecodeReadable over either transport.
func rpcDecodeReadable(m *idgenv1.DecodeReadableRequest) (*idgenv1.DecodeReadableResponse, error) {
	tag, id, err := readable.Decode(m.GetValue())
	if err != nil {
		return nil, err
	}
	return &idgenv1.DecodeReadableResponse{Tag: tag, Id: id}, nil
}

// authorizeTag admits a call for tag as requireTag does over HTTP
// (admitTag): the token travels as authorization metadata,
// "Bearer <token>".
func (s *Server) authorizeTag(h http.Header, tag string) error {
	tok, ok := parseBearer(h.Get("Authorization"))
	return s.admitTag(tok, ok, tag)
}
