// Package gid turns database ids into the opaque global ids the API shows.
//
// Ids are unique across every type (each table owns a range of 1<<32), so the
// number alone names the row. It is shuffled by an invertible 64-bit
// mixing function before encoding so that consecutive rows do not get
// consecutive ids. This hides nothing that scope checks must protect: every
// id is still checked against the caller.
package gid

import (
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
)

const (
	prefix = "tg"
	key    = 0x5bd1e9955bd1e995
	mul1   = 0xbf58476d1ce4e5b9 // odd, so invertible modulo 2^64
	mul2   = 0x94d049bb133111eb
)

// inverse returns the inverse of an odd m modulo 2^64, by Newton's iteration.
func inverse(m uint64) uint64 {
	x := m
	for range 6 {
		x *= 2 - m*x
	}
	return x
}

var inv1, inv2 = inverse(mul1), inverse(mul2)

// mix is the SplitMix64 finaliser: every input bit moves every output bit,
// and each step can be undone.
func mix(x uint64) uint64 {
	x ^= key
	x ^= x >> 30
	x *= mul1
	x ^= x >> 27
	x *= mul2
	x ^= x >> 31
	return x
}

func unmix(x uint64) uint64 {
	x = unshift(x, 31)
	x *= inv2
	x = unshift(x, 27)
	x *= inv1
	x = unshift(x, 30)
	return x ^ key
}

// unshift undoes x ^= x >> s.
func unshift(x uint64, s uint) uint64 {
	y := x
	for range 64 / s {
		y = x ^ y>>s
	}
	return y
}

var enc = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// ErrInvalid is returned for a string that is not an id this server made.
var ErrInvalid = errors.New("invalid id")

// Encode returns the opaque form of a database id.
func Encode(id int) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], mix(uint64(id)))
	return prefix + enc.EncodeToString(b[:])
}

// Append appends Encode(id) to b, allocating nothing of its own (the
// transcript's hot path writes some thousand ids a read).
func Append(b []byte, id int) []byte {
	var raw [8]byte
	binary.BigEndian.PutUint64(raw[:], mix(uint64(id)))
	return enc.AppendEncode(append(b, prefix...), raw[:])
}

// Decode returns the database id of an opaque id.
func Decode(s string) (int, error) {
	if len(s) != len(prefix)+13 || s[:len(prefix)] != prefix {
		return 0, ErrInvalid
	}
	b, err := enc.DecodeString(s[len(prefix):])
	if err != nil || len(b) != 8 {
		return 0, ErrInvalid
	}
	id := unmix(binary.BigEndian.Uint64(b))
	if id > 1<<62 {
		return 0, ErrInvalid
	}
	return int(id), nil
}

// MarshalID writes an id as a GraphQL ID.
func MarshalID(id int) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		_, _ = io.WriteString(w, strconv.Quote(Encode(id)))
	})
}

// UnmarshalID reads a GraphQL ID. A malformed id is reported like any other
// unknown id by the resolvers, so callers learn nothing from the format.
func UnmarshalID(v any) (int, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("id must be a string")
	}
	id, err := Decode(s)
	if err != nil {
		// An id no row can have: lookups find nothing, and answer as for
		// any other id the caller cannot see.
		return -1, nil
	}
	return id, nil
}
