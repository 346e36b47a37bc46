package graph

import (
	"context"
	"net/http"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/transport"
)

// post is gqlgen's POST transport with one part done here: a response
// that is data alone (no errors, extensions or incremental parts) is
// written without the second pass gqlgen's encoding makes over it.
// gqlgen writes a response with json.Marshal, which validates the data it
// wrote itself a moment before and escapes HTML in it: over a transcript
// of a few hundred kilobytes, a third of the request's CPU. Here the data
// is only escaped and compacted as json.Marshal would (appendCompact), so
// the bytes sent are the same; everything else (reading the request,
// errors and their statuses, headers) is gqlgen's own.
type post struct{ transport.POST }

func (p post) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	out := &dataWriter{ResponseWriter: w}
	p.POST.Do(out, r, dataExecutor{GraphExecutor: exec, out: out})
}

// dataExecutor hands each response that is data alone to its dataWriter
// to write, and gqlgen an empty one in its place.
type dataExecutor struct {
	graphql.GraphExecutor
	out *dataWriter
}

func (e dataExecutor) DispatchOperation(ctx context.Context, rc *graphql.OperationContext) (graphql.ResponseHandler, context.Context) {
	next, ctx := e.GraphExecutor.DispatchOperation(ctx, rc)
	return func(ctx context.Context) *graphql.Response {
		resp := next(ctx)
		if resp == nil || len(resp.Data) == 0 || len(resp.Errors) > 0 || len(resp.Extensions) > 0 ||
			resp.Label != "" || resp.Path != nil || resp.HasNext != nil {
			return resp
		}
		e.out.writeData(resp.Data)
		return &graphql.Response{}
	}, ctx
}

// dataWriter writes a response that is data alone, then drops the empty
// one gqlgen writes after it.
type dataWriter struct {
	http.ResponseWriter
	done bool
}

var responseBuffers = sync.Pool{New: func() any { return new([]byte) }}

func (w *dataWriter) writeData(data []byte) {
	bp := responseBuffers.Get().(*[]byte)
	b := append((*bp)[:0], `{"data":`...)
	b = appendCompact(b, data)
	b = append(b, '}')
	_, _ = w.ResponseWriter.Write(b)
	w.done = true
	if cap(b) <= 4<<20 {
		*bp = b
		responseBuffers.Put(bp)
	}
}

func (w *dataWriter) Write(b []byte) (int, error) {
	if w.done {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *dataWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// appendCompact appends the JSON value src as json.Marshal writes a
// json.RawMessage: whitespace between tokens dropped, and in strings <, >
// and & written as \u003c, \u003e and \u0026, and U+2028 and U+2029 as
// \u2028 and \u2029. src is gqlgen's own writing, valid JSON; it is not
// validated again.
func appendCompact(dst, src []byte) []byte {
	start := 0
	inString := false
	for i := 0; i < len(src); i++ {
		if inString {
			for i < len(src) && !stringStop[src[i]] {
				i++
			}
			if i == len(src) {
				break
			}
			switch c := src[i]; c {
			case '\\':
				i++ // the escaped byte is copied with the run
			case '"':
				inString = false
			case 0xE2:
				if i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8 {
					dst = append(dst, src[start:i]...)
					dst = append(dst, '\\', 'u', '2', '0', '2', lowerHex[src[i+2]&0xF])
					i += 2
					start = i + 1
				}
			default: // <, > or &
				dst = append(dst, src[start:i]...)
				dst = append(dst, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xF])
				start = i + 1
			}
			continue
		}
		switch src[i] {
		case '"':
			inString = true
		case ' ', '\t', '\n', '\r':
			dst = append(dst, src[start:i]...)
			start = i + 1
		}
	}
	return append(dst, src[start:]...)
}

// stringStop marks the bytes appendCompact stops at in a string.
var stringStop = [256]bool{'"': true, '\\': true, '<': true, '>': true, '&': true, 0xE2: true}

const lowerHex = "0123456789abcdef"
