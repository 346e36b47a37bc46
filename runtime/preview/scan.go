package preview

import (
	"bytes"
	"math/bits"
	"unicode/utf8"
)

// Node kinds.
const (
	kObject  = '{'
	kArray   = '['
	kString  = '"'
	kNumber  = '0'
	kLiteral = 't'
)

const (
	// maxDepth matches encoding/json: deeper documents preview as text.
	maxDepth = 10000
	// maxNodes caps the nodes one scan records, so a pathological document
	// cannot make the scan hold more than a bounded index of it.
	maxNodes = 1 << 15
	// minItems is how many leading items of an array are always recorded:
	// a preview splits its budget among up to that many large items.
	minItems = 3
)

// node is one recorded JSON value: offsets into the content, never a copy.
type node struct {
	start, end       int // the value's bytes
	keyStart, keyEnd int // the member key's bytes, when the value is an object member
	size             int // characters of the value's compact encoding
	keySize          int // characters of the key token
	count            int // items of an array or keys of an object, all of them
	first, last      int32
	next             int32
	kind             byte
	// incomplete marks a container the node cap kept from recording a
	// child it would have: its size is raised above any budget so it is
	// never copied whole, since unrecorded strings are never checked.
	incomplete bool
}

// scanner validates a JSON document in one pass and records the nodes a
// preview of at most budget characters could show: the leading children of
// each recorded container while their running cost stays within budget
// (objects count each member at its cheapest, arrays each item whole, and
// arrays always record their first minItems items). Everything else is
// skipped: its structure checked, its strings only scanned for their end.
type scanner struct {
	b        []byte
	i        int
	ws       int // whitespace bytes outside strings so far
	extra    int // UTF-8 continuation bytes inside strings so far
	depth    int
	budget   int
	maxNodes int
	nodes    []node
}

func newScanner(b []byte, budget, maxNodes int) *scanner {
	return &scanner{b: b, budget: budget, maxNodes: maxNodes, nodes: make([]node, 0, 64)}
}

// run scans the whole document and reports whether it is valid JSON, as
// far as it checks: all of the structure, and every recorded string
// (escapes, control characters, UTF-8). The root is nodes[0].
func (s *scanner) run() bool {
	s.skipWS()
	if _, ok := s.value(true); !ok {
		return false
	}
	s.skipWS()
	return s.i == len(s.b)
}

// items is the root's item count as Counts defines it.
func (s *scanner) items() int {
	r := s.nodes[0]
	if r.kind == kObject || r.kind == kArray {
		return r.count
	}
	return 1
}

var (
	isWS     [256]bool
	strPlain [256]bool // string bytes that need no attention
	isDigit  [256]bool
)

func init() {
	for _, c := range " \t\n\r" {
		isWS[c] = true
	}
	for c := 0x20; c < 0x80; c++ {
		strPlain[c] = c != '"' && c != '\\'
	}
	for c := '0'; c <= '9'; c++ {
		isDigit[c] = true
	}
}

func (s *scanner) skipWS() {
	i := s.i
	for i < len(s.b) && isWS[s.b[i]] {
		i++
	}
	s.ws += i - s.i
	s.i = i
}

// value scans the value at s.i, recording it when rec is set and the node
// cap allows. It returns the node's index, or -1.
func (s *scanner) value(rec bool) (int32, bool) {
	if s.i >= len(s.b) {
		return -1, false
	}
	start, ws0, extra0 := s.i, s.ws, s.extra
	idx := int32(-1)
	if rec && len(s.nodes) < s.maxNodes {
		idx = int32(len(s.nodes))
		s.nodes = append(s.nodes, node{start: start, first: -1, last: -1, next: -1})
	}
	var ok bool
	var kind byte
	switch c := s.b[s.i]; {
	case c == '"' && idx >= 0:
		kind, ok = kString, s.str()
	case c == '"':
		kind, ok = kString, s.skipStr()
	case c == '{':
		kind, ok = kObject, s.object(idx)
	case c == '[':
		kind, ok = kArray, s.array(idx)
	case c == 't':
		kind, ok = kLiteral, s.literal("true")
	case c == 'f':
		kind, ok = kLiteral, s.literal("false")
	case c == 'n':
		kind, ok = kLiteral, s.literal("null")
	case c == '-' || isDigit[c]:
		kind, ok = kNumber, s.number()
	}
	if !ok {
		return -1, false
	}
	if idx >= 0 {
		n := &s.nodes[idx]
		n.kind = kind
		n.end = s.i
		n.size = (s.i - start) - (s.ws - ws0) - (s.extra - extra0)
		if n.incomplete {
			n.size = max(n.size, s.budget+1)
		}
	}
	return idx, true
}

func (s *scanner) link(parent, child int32) {
	p := &s.nodes[parent]
	if p.first < 0 {
		p.first = child
	} else {
		s.nodes[p.last].next = child
	}
	p.last = child
}

func (s *scanner) object(idx int32) bool {
	if s.depth++; s.depth > maxDepth {
		return false
	}
	s.i++
	s.skipWS()
	count := 0
	incomplete := false
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
	} else {
		rec := idx >= 0
		cum := 0
		for {
			if s.i >= len(s.b) || s.b[s.i] != '"' {
				return false
			}
			ks, extra0 := s.i, s.extra
			if rec && !s.str() || !rec && !s.skipStr() {
				return false
			}
			ke := s.i
			keySize := (ke - ks) - (s.extra - extra0)
			s.skipWS()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				return false
			}
			s.i++
			s.skipWS()
			child, ok := s.value(rec)
			if !ok {
				return false
			}
			count++
			if child >= 0 {
				c := &s.nodes[child]
				c.keyStart, c.keyEnd, c.keySize = ks, ke, keySize
				s.link(idx, child)
				incomplete = incomplete || c.incomplete
				cum += c.keySize + 2 + minCost(c)
				rec = cum <= s.budget
			} else {
				incomplete = incomplete || rec
				rec = false
			}
			s.skipWS()
			if s.i >= len(s.b) {
				return false
			}
			if s.b[s.i] == ',' {
				s.i++
				s.skipWS()
				continue
			}
			if s.b[s.i] != '}' {
				return false
			}
			s.i++
			break
		}
	}
	if idx >= 0 {
		s.nodes[idx].count = count
		s.nodes[idx].incomplete = incomplete
	}
	s.depth--
	return true
}

func (s *scanner) array(idx int32) bool {
	if s.depth++; s.depth > maxDepth {
		return false
	}
	s.i++
	s.skipWS()
	count := 0
	incomplete := false
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
	} else {
		rec := idx >= 0
		cum := 0
		for {
			want := rec && (count < minItems || cum <= s.budget)
			child, ok := s.value(want)
			if !ok {
				return false
			}
			count++
			if child >= 0 {
				s.link(idx, child)
				incomplete = incomplete || s.nodes[child].incomplete
				cum += s.nodes[child].size + 1
			} else {
				incomplete = incomplete || want
				rec = false
			}
			s.skipWS()
			if s.i >= len(s.b) {
				return false
			}
			if s.b[s.i] == ',' {
				s.i++
				s.skipWS()
				continue
			}
			if s.b[s.i] != ']' {
				return false
			}
			s.i++
			break
		}
	}
	if idx >= 0 {
		s.nodes[idx].count = count
		s.nodes[idx].incomplete = incomplete
	}
	s.depth--
	return true
}

// skipStr moves past the string at s.i without checking its content: a
// string no preview can show only needs its end found, and IndexByte finds
// it many times faster than a check could.
func (s *scanner) skipStr() bool {
	b := s.b
	for i := s.i + 1; ; i++ {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return false
		}
		i += j
		k := i
		for b[k-1] == '\\' {
			k--
		}
		if (i-k)%2 == 0 {
			s.i = i + 1
			return true
		}
	}
}

// str validates the string at s.i, counting the continuation bytes of its
// multi-byte characters.
func (s *scanner) str() bool {
	b := s.b
	i := s.i + 1
	for {
		i = nextSpecial(b, i)
		if i >= len(b) {
			return false
		}
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			return true
		case c == '\\':
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return false
				}
				i += 6
			default:
				return false
			}
		case c < 0x20:
			return false
		case c >= 0xc2 && c <= 0xdf && i+1 < len(b) && b[i+1]&0xc0 == 0x80:
			// The common two-byte characters (accented Latin, Greek,
			// Cyrillic) without a call.
			s.extra++
			i += 2
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return false
			}
			s.extra += size - 1
			i += size
		}
	}
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// nextSpecial returns the index of the first byte from i on that a string
// scan must look at: a quote, a backslash, a control character or a byte
// that is not ASCII. Eight bytes at a time: long strings are most of a
// large result.
func nextSpecial(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := attention(le64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(b) && strPlain[b[i]] {
		i++
	}
	return i
}

// attention sets the top bit of each of eight string bytes that needs a
// look; the lowest set bit is exact, which is all nextSpecial uses.
func attention(x uint64) uint64 {
	q := x ^ (lsb * '"')
	bs := x ^ (lsb * '\\')
	return ((q-lsb)&^q | (bs-lsb)&^bs | (x-lsb*0x20)&^x | x) & msb
}

func isHex(c byte) bool {
	return isDigit[c] || (c|0x20 >= 'a' && c|0x20 <= 'f')
}

func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

func (s *scanner) number() bool {
	b := s.b
	i := s.i
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return false
	case b[i] == '0':
		i++
	case isDigit[b[i]]:
		for i < len(b) && isDigit[b[i]] {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && isDigit[b[i]] {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && isDigit[b[i]] {
			i++
		}
		if i == d {
			return false
		}
	}
	s.i = i
	return true
}
