package preview

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf8"
)

const (
	// partialFloor is the least room worth spending on one more, cut, array
	// item after the whole ones: less shows nothing but a marker.
	partialFloor = 100
	// memberFloor is the least share an object member gets before later
	// keys are left out, so a wide object shows some content, not only keys.
	memberFloor = 48
)

// Marker lengths in characters, with nd and td the digits of the two counts:
//
//	string: …[+N chars, T in all]
//	array:  "…[+N items, T in all]"
//	object: "…":"[+N keys, T in all]"
func strMark(nd, td int) int { return 19 + nd + td }
func arrMark(nd, td int) int { return 21 + nd + td }
func objMark(nd, td int) int { return 23 + nd + td }

// minCost is the fewest characters a node can be shown in.
func minCost(n *node) int {
	var c int
	switch n.kind {
	case kString, kNumber:
		d := digits(n.size)
		c = 2 + strMark(d, d)
	case kArray:
		d := digits(n.count)
		c = 2 + arrMark(d, d)
	case kObject:
		d := digits(n.count)
		c = 2 + objMark(d, d)
	default:
		return n.size
	}
	return min(c, n.size)
}

type emitter struct {
	src   []byte
	nodes []node
	out   []byte
	spans []Span
}

func buildJSON(src []byte, nodes []node, c Context, counts Counts, limit int) (Result, error) {
	root := &nodes[0]
	if root.size <= limit {
		body := appendCompact(make([]byte, 0, root.end-root.start), src[root.start:root.end])
		return Result{Body: body, Visible: []Span{{int64(root.start), int64(root.end)}}}, nil
	}
	e := &emitter{src: src, nodes: nodes, out: make([]byte, 0, limit+limit/4)}
	e.out = append(e.out, '{')
	e.out = appendContext(e.out, c, counts)
	fixed := utf8.RuneCount(e.out) + 1
	if root.kind == kObject {
		budget := limit - fixed
		d := digits(root.count)
		if budget < 1+objMark(d, d) {
			return Result{}, errNoRoom(limit)
		}
		e.object(0, budget, true)
	} else {
		key := `,"value":`
		if root.kind == kArray {
			key = `,"items":`
		}
		e.out = append(e.out, key...)
		budget := limit - fixed - len(key)
		if budget < minCost(root) {
			return Result{}, errNoRoom(limit)
		}
		e.value(0, budget)
	}
	e.out = append(e.out, '}')
	if err := checkLimit(e.out, limit); err != nil {
		return Result{}, err
	}
	return Result{Body: e.out, Partial: true, Visible: mergeSpans(src, e.spans)}, nil
}

func errNoRoom(limit int) error {
	return fmt.Errorf("build preview: limit %d leaves no room beside the result context", limit)
}

func (e *emitter) span(start, end int) {
	if end > start {
		e.spans = append(e.spans, Span{int64(start), int64(end)})
	}
}

func (e *emitter) children(idx int32) []int32 {
	var kids []int32
	for c := e.nodes[idx].first; c >= 0; c = e.nodes[c].next {
		kids = append(kids, c)
	}
	return kids
}

// value writes node idx in at most budget characters; budget is at least
// the node's minCost.
func (e *emitter) value(idx int32, budget int) {
	n := &e.nodes[idx]
	switch {
	case n.size <= budget:
		e.out = appendCompact(e.out, e.src[n.start:n.end])
		e.span(n.start, n.end)
	case n.kind == kArray:
		e.array(idx, budget)
	case n.kind == kObject:
		e.object(idx, budget, false)
	default:
		e.cut(n, budget)
	}
}

// cut writes a string, or a number too long for its budget, as a string
// that keeps its head and ends with a marker.
func (e *emitter) cut(n *node, budget int) {
	raw := e.src[n.start:n.end]
	first := n.start
	if n.kind == kString {
		raw = raw[1 : len(raw)-1]
		first++
	}
	total := decodedChars(raw)
	td := digits(total)
	size, shown := head(raw, budget-2-strMark(td, td))
	e.out = append(e.out, '"')
	e.out = append(e.out, raw[:size]...)
	e.out = append(e.out, "…[+"...)
	e.out = strconv.AppendInt(e.out, int64(total-shown), 10)
	e.out = append(e.out, " chars, "...)
	e.out = strconv.AppendInt(e.out, int64(total), 10)
	e.out = append(e.out, ` in all]"`...)
	if size > 0 {
		e.span(n.start, first+size)
	}
}

func (e *emitter) array(idx int32, budget int) {
	kids := e.children(idx)
	total := e.nodes[idx].count
	td := digits(total)
	mk := arrMark(td, td)
	over := func(k int) int { return max(k+1, 2) } // brackets and commas of k elements

	// Leading items whole while they fit, then one cut item with what is left.
	used, whole := 0, 0
	for whole < len(kids) {
		s := e.nodes[kids[whole]].size
		if used+s+over(whole+2)+mk > budget {
			break
		}
		used += s
		whole++
	}
	if whole >= minItems || (whole > 0 && whole == len(kids)) {
		alloc := make([]int, whole, whole+1)
		for i := range alloc {
			alloc[i] = e.nodes[kids[i]].size
		}
		if whole < len(kids) {
			left := budget - used - over(whole+2) - mk
			if left >= partialFloor && left >= minCost(&e.nodes[kids[whole]]) {
				alloc = append(alloc, left)
			}
		}
		e.writeArray(kids[:len(alloc)], alloc, total)
		return
	}
	// Large items: share the budget among the first few.
	for k := min(len(kids), minItems); k > 0; k-- {
		marked := k < total
		avail := budget - over(k)
		if marked {
			avail -= mk + 1
		}
		sizes, mins := make([]int, k), make([]int, k)
		need := 0
		for i := range k {
			n := &e.nodes[kids[i]]
			sizes[i], mins[i] = n.size, minCost(n)
			need += mins[i]
		}
		if need <= avail {
			e.writeArray(kids[:k], waterfill(sizes, mins, avail), total)
			return
		}
	}
	e.writeArray(nil, nil, total)
}

func (e *emitter) writeArray(kids []int32, alloc []int, total int) {
	e.out = append(e.out, '[')
	for i, k := range kids {
		if i > 0 {
			e.out = append(e.out, ',')
		}
		e.value(k, alloc[i])
	}
	if len(kids) < total {
		if len(kids) > 0 {
			e.out = append(e.out, ',')
		}
		e.out = append(e.out, `"…[+`...)
		e.out = strconv.AppendInt(e.out, int64(total-len(kids)), 10)
		e.out = append(e.out, " items, "...)
		e.out = strconv.AppendInt(e.out, int64(total), 10)
		e.out = append(e.out, ` in all]"`...)
	}
	e.out = append(e.out, ']')
}

// object writes an object in budget characters. The root object is written
// without braces, each member after a comma, because the result context
// comes first.
func (e *emitter) object(idx int32, budget int, root bool) {
	kids := e.children(idx)
	total := e.nodes[idx].count
	td := digits(total)
	mk := objMark(td, td)
	over := func(k int) int { // braces and commas of k elements
		if root {
			return k
		}
		return max(k+1, 2)
	}
	keys := make([]int, len(kids))
	sizes, mins := make([]int, len(kids)), make([]int, len(kids))
	for i, k := range kids {
		n := &e.nodes[k]
		keys[i], sizes[i], mins[i] = n.keySize+1, n.size, minCost(n)
	}
	// fit returns how many leading members fit when member i costs
	// cost(i), and whether the marker is needed.
	fit := func(cost func(i int) int) (int, bool) {
		if len(kids) == total {
			sum := 0
			for i := range kids {
				sum += cost(i)
			}
			if sum+over(total) <= budget {
				return total, false
			}
		}
		sum, k := 0, 0
		for k < len(kids) && sum+cost(k)+over(k+2)+mk <= budget {
			sum += cost(k)
			k++
		}
		return k, true
	}
	floor := max(budget/16, memberFloor)
	k, marked := fit(func(i int) int { return keys[i] + min(sizes[i], max(mins[i], floor)) })
	if k == 0 {
		k, marked = fit(func(i int) int { return keys[i] + mins[i] })
	}
	avail := budget - over(k)
	if marked {
		avail -= mk + 1
		if k == 0 && !root {
			avail++ // a lone marker needs no comma
		}
	}
	for i := range k {
		avail -= keys[i]
	}
	alloc := waterfill(sizes[:k], mins[:k], avail)

	if !root {
		e.out = append(e.out, '{')
	}
	for i := range k {
		if root || i > 0 {
			e.out = append(e.out, ',')
		}
		n := &e.nodes[kids[i]]
		e.out = append(e.out, e.src[n.keyStart:n.keyEnd]...)
		e.out = append(e.out, ':')
		e.span(n.keyStart, n.keyEnd)
		e.value(kids[i], alloc[i])
	}
	if marked {
		if root || k > 0 {
			e.out = append(e.out, ',')
		}
		e.out = append(e.out, `"…":"[+`...)
		e.out = strconv.AppendInt(e.out, int64(total-k), 10)
		e.out = append(e.out, " keys, "...)
		e.out = strconv.AppendInt(e.out, int64(total), 10)
		e.out = append(e.out, ` in all]"`...)
	}
	if !root {
		e.out = append(e.out, '}')
	}
}

// waterfill shares avail among values: each gets at least its minimum and
// at most its whole size, and the cut ones get equal shares, so small
// values pass whole and large ones split what is left. It needs
// sum(mins) <= avail.
func waterfill(sizes, mins []int, avail int) []int {
	at := func(level int) int {
		s := 0
		for i := range sizes {
			s += min(sizes[i], max(mins[i], level))
		}
		return s
	}
	lo, hi := 0, 0
	for _, s := range sizes {
		hi = max(hi, s)
	}
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if at(mid) <= avail {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	alloc := make([]int, len(sizes))
	left := avail - at(lo)
	for i := range sizes {
		alloc[i] = min(sizes[i], max(mins[i], lo))
		if left > 0 && alloc[i] < sizes[i] {
			alloc[i]++
			left--
		}
	}
	return alloc
}

// head returns how many bytes of raw (a string token's content, or a
// number) fit in budget characters without splitting an escape or a
// character, and how many decoded characters they hold.
func head(raw []byte, budget int) (size, decoded int) {
	chars := 0
	for size < len(raw) {
		n, cost := unit(raw[size:])
		if chars+cost > budget {
			break
		}
		chars += cost
		size += n
		decoded++
	}
	return size, decoded
}

// decodedChars is the length in characters of a string token's content
// once its escapes are decoded.
func decodedChars(raw []byte) int {
	total := 0
	for i := 0; i < len(raw); {
		for i+8 <= len(raw) {
			x := le64(raw[i:])
			bs := x ^ (lsb * '\\')
			if ((bs-lsb)&^bs|x)&msb != 0 {
				break
			}
			i += 8
			total += 8
		}
		if i >= len(raw) {
			break
		}
		n, _ := unit(raw[i:])
		i += n
		total++
	}
	return total
}

// unit returns the bytes and the encoded characters of the decoded
// character at the start of raw; a surrogate pair is one character.
func unit(raw []byte) (size, cost int) {
	switch c := raw[0]; {
	case c == '\\':
		if raw[1] != 'u' {
			return 2, 2
		}
		if len(raw) >= 12 && isSurrogate(raw[2:6], false) && raw[6] == '\\' && raw[7] == 'u' && isSurrogate(raw[8:12], true) {
			return 12, 12
		}
		return 6, 6
	case c < utf8.RuneSelf:
		return 1, 1
	default:
		_, n := utf8.DecodeRune(raw)
		return n, 1
	}
}

// isSurrogate reports whether four hex digits name a UTF-16 surrogate of
// the wanted half (high D800–DBFF, low DC00–DFFF).
func isSurrogate(h []byte, low bool) bool {
	if h[0]|0x20 != 'd' {
		return false
	}
	switch h[1] | 0x20 {
	case '8', '9', 'a', 'b':
		return !low
	case 'c', 'd', 'e', 'f':
		return low
	}
	return false
}

// appendCompact copies valid JSON without its insignificant whitespace.
func appendCompact(dst, src []byte) []byte {
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '"':
			j := i + 1
			for {
				j += bytes.IndexByte(src[j:], '"')
				k := j
				for k > i+1 && src[k-1] == '\\' {
					k--
				}
				if (j-k)%2 == 0 {
					break
				}
				j++
			}
			dst = append(dst, src[i:j+1]...)
			i = j + 1
		case isWS[c]:
			i++
		default:
			dst = append(dst, c)
			i++
		}
	}
	return dst
}
