// Package calc is the calculator tool: a small arithmetic language, parsed
// and evaluated here, so that no expression a model writes ever reaches
// anything that runs code.
//
// The parser is a hand-written recursive descent rather than go/parser: Go's
// grammar reads ^ as exclusive or at the precedence of +, has no right
// associative operator, and would word its errors in Go's terms.
//
// Precedence, tightest first:
//
//	( ) and function calls
//	^   power, right-associative: 2^3^2 = 2^9; ** is accepted for it
//	-   unary minus and plus, looser than ^: -2^2 = -4, 2^-1 = 0.5
//	* / %  left-associative; % takes the sign of the dividend
//	+ -    left-associative
package calc

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// SignificantDigits is how far answers are rounded: the product's number.
const SignificantDigits = 12

// maxDepth bounds nesting, so a pathological expression fails plainly
// instead of exhausting the stack.
const maxDepth = 200

// Error says what went wrong in an expression and where.
type Error struct {
	// Pos is the 1-based character (not byte) position; 0 when the
	// expression as a whole is at fault.
	Pos int
	// Msg says what is wrong, without the position.
	Msg string
}

// Error words the problem with its position, e.g.
// `unexpected ")" at character 7`.
func (e *Error) Error() string {
	if e.Pos == 0 {
		return e.Msg
	}
	return fmt.Sprintf("%s at character %d", e.Msg, e.Pos)
}

// Evaluate computes an arithmetic expression and returns the answer rounded
// to 12 significant digits, e.g. "0.666666666667" for 2/3. Division by zero
// and results that are infinite or not a number are errors.
func Evaluate(expression string) (string, error) {
	toks, err := scan(expression)
	if err != nil {
		return "", err
	}
	if len(toks) == 1 {
		return "", &Error{Msg: "empty expression"}
	}
	p := &parser{toks: toks}
	x, err := p.sum()
	if err != nil {
		return "", err
	}
	if t := p.peek(); t.kind != tokEnd {
		return "", unexpected(t)
	}
	return Format(x), nil
}

// Format writes x rounded to 12 significant digits, with no trailing zeros,
// in plain decimals from 1e-6 up to 1e21 and in exponent form beyond.
func Format(x float64) string {
	r, err := strconv.ParseFloat(strconv.FormatFloat(x, 'e', SignificantDigits-1, 64), 64)
	if err != nil || r == 0 {
		// Rounding a finite value never fails; zero drops its sign.
		return "0"
	}
	if a := math.Abs(r); a < 1e21 && a >= 1e-6 {
		return strconv.FormatFloat(r, 'f', -1, 64)
	}
	s := strconv.FormatFloat(r, 'e', -1, 64)
	mant, exp, _ := strings.Cut(s, "e")
	// Go pads the exponent to two digits (1e-07); people write 1e-7.
	return mant + "e" + exp[:1] + strings.TrimLeft(exp[1:], "0")
}

type tokenKind int

const (
	tokEnd tokenKind = iota
	tokNumber
	tokName
	tokOp
)

type token struct {
	kind tokenKind
	// text is the token as written; op holds the operator it stands for.
	text string
	op   rune
	num  float64
	pos  int
}

// scan splits the expression into tokens, ending with tokEnd.
func scan(expr string) ([]token, error) {
	var toks []token
	rs := []rune(expr)
	for i := 0; i < len(rs); {
		r := rs[i]
		pos := i + 1
		switch {
		case unicode.IsSpace(r):
			i++
		case isDigit(r) || r == '.':
			j := i
			for j < len(rs) && (isDigit(rs[j]) || rs[j] == '.') {
				j++
			}
			// An exponent only when digits follow, so "2e" is not half a number.
			if j < len(rs) && (rs[j] == 'e' || rs[j] == 'E') {
				k := j + 1
				if k < len(rs) && (rs[k] == '+' || rs[k] == '-') {
					k++
				}
				if k < len(rs) && isDigit(rs[k]) {
					for k < len(rs) && isDigit(rs[k]) {
						k++
					}
					j = k
				}
			}
			text := string(rs[i:j])
			num, err := strconv.ParseFloat(text, 64)
			if err != nil && (!isRange(err) || math.IsInf(num, 0)) {
				if isRange(err) {
					return nil, &Error{Pos: pos, Msg: fmt.Sprintf("number %q is too large", text)}
				}
				return nil, &Error{Pos: pos, Msg: fmt.Sprintf("malformed number %q", text)}
			}
			toks = append(toks, token{kind: tokNumber, text: text, num: num, pos: pos})
			i = j
		case r == '_' || unicode.IsLetter(r):
			j := i
			for j < len(rs) && (rs[j] == '_' || unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j])) {
				j++
			}
			toks = append(toks, token{kind: tokName, text: string(rs[i:j]), pos: pos})
			i = j
		case r == '*' && i+1 < len(rs) && rs[i+1] == '*':
			toks = append(toks, token{kind: tokOp, text: "**", op: '^', pos: pos})
			i += 2
		default:
			op, ok := operators[r]
			if !ok {
				return nil, &Error{Pos: pos, Msg: fmt.Sprintf("unexpected character %q", string(r))}
			}
			toks = append(toks, token{kind: tokOp, text: string(r), op: op, pos: pos})
			i++
		}
	}
	return append(toks, token{kind: tokEnd, pos: len(rs) + 1}), nil
}

// operators maps each operator character to the one it stands for; models
// sometimes write the typographic signs.
var operators = map[rune]rune{
	'+': '+', '-': '-', '*': '*', '/': '/', '%': '%', '^': '^', '(': '(', ')': ')', ',': ',',
	'×': '*', '÷': '/', '−': '-',
}

func isDigit(r rune) bool {
	return r >= '0' && r <= '9'
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

type parser struct {
	toks  []token
	i     int
	depth int
}

func (p *parser) peek() token {
	return p.toks[p.i]
}

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEnd {
		p.i++
	}
	return t
}

func (p *parser) isOp(ops ...rune) bool {
	t := p.peek()
	if t.kind != tokOp {
		return false
	}
	for _, op := range ops {
		if t.op == op {
			return true
		}
	}
	return false
}

// sum = product { ("+" | "-") product }
func (p *parser) sum() (float64, error) {
	x, err := p.product()
	if err != nil {
		return 0, err
	}
	for p.isOp('+', '-') {
		op := p.next()
		y, err := p.product()
		if err != nil {
			return 0, err
		}
		if op.op == '-' {
			y = -y
		}
		x = cancel(x+y, x, y)
		if err := check(x, op.pos); err != nil {
			return 0, err
		}
	}
	return x, nil
}

// product = unary { ("*" | "/" | "%") unary }
func (p *parser) product() (float64, error) {
	x, err := p.unary()
	if err != nil {
		return 0, err
	}
	for p.isOp('*', '/', '%') {
		op := p.next()
		y, err := p.unary()
		if err != nil {
			return 0, err
		}
		switch {
		case op.op != '*' && y == 0:
			return 0, &Error{Pos: op.pos, Msg: "division by zero"}
		case op.op == '*':
			x *= y
		case op.op == '/':
			x /= y
		default:
			x = math.Mod(x, y)
		}
		if err := check(x, op.pos); err != nil {
			return 0, err
		}
	}
	return x, nil
}

// unary = ("-" | "+") unary | power
func (p *parser) unary() (float64, error) {
	if err := p.enter(); err != nil {
		return 0, err
	}
	defer p.leave()
	if p.isOp('-', '+') {
		op := p.next()
		x, err := p.unary()
		if op.op == '-' {
			x = -x
		}
		return x, err
	}
	return p.power()
}

// power = primary [ "^" unary ]; the right operand is a unary, which makes
// ^ right-associative and lets 2^-1 mean one half.
func (p *parser) power() (float64, error) {
	base, err := p.primary()
	if err != nil {
		return 0, err
	}
	if !p.isOp('^') {
		return base, nil
	}
	op := p.next()
	exp, err := p.unary()
	if err != nil {
		return 0, err
	}
	if base == 0 && exp < 0 {
		return 0, &Error{Pos: op.pos, Msg: "division by zero"}
	}
	x := math.Pow(base, exp)
	return x, check(x, op.pos)
}

// primary = number | name | name "(" [ sum { "," sum } ] ")" | "(" sum ")"
func (p *parser) primary() (float64, error) {
	t := p.next()
	switch {
	case t.kind == tokNumber:
		return t.num, nil
	case t.kind == tokName:
		return p.name(t)
	case t.kind == tokOp && t.op == '(':
		if err := p.enter(); err != nil {
			return 0, err
		}
		defer p.leave()
		x, err := p.sum()
		if err != nil {
			return 0, err
		}
		if !p.isOp(')') {
			return 0, p.unclosed(t)
		}
		p.next()
		return x, nil
	}
	return 0, unexpected(t)
}

// name evaluates a constant or a function call.
func (p *parser) name(t token) (float64, error) {
	key := strings.ToLower(t.text)
	if c, ok := constants[key]; ok {
		return c, nil
	}
	f, ok := functions[key]
	if !ok {
		what := "name"
		if p.isOp('(') {
			what = "function"
		}
		msg := fmt.Sprintf("unknown %s %q", what, t.text)
		if hint, ok := hints[key]; ok {
			msg += "; " + hint
		}
		return 0, &Error{Pos: t.pos, Msg: msg}
	}
	if !p.isOp('(') {
		return 0, &Error{Pos: p.peek().pos, Msg: fmt.Sprintf("expected \"(\" after %s", t.text)}
	}
	open := p.next()
	var args []float64
	if !p.isOp(')') {
		for {
			x, err := p.sum()
			if err != nil {
				return 0, err
			}
			args = append(args, x)
			if !p.isOp(',') {
				break
			}
			p.next()
		}
	}
	if !p.isOp(')') {
		return 0, p.unclosed(open)
	}
	p.next()
	if len(args) < f.minArgs || (f.maxArgs >= 0 && len(args) > f.maxArgs) {
		return 0, &Error{Pos: t.pos, Msg: fmt.Sprintf("%s takes %s, got %d", key, f.arity(), len(args))}
	}
	x, msg := f.eval(args)
	if msg != "" {
		return 0, &Error{Pos: t.pos, Msg: key + " " + msg}
	}
	return x, check(x, t.pos)
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return &Error{Pos: p.peek().pos, Msg: "expression nested too deeply"}
	}
	return nil
}

func (p *parser) leave() {
	p.depth--
}

// unclosed reports a "(" whose ")" never came, or whatever came instead.
func (p *parser) unclosed(open token) error {
	if t := p.peek(); t.kind != tokEnd {
		return unexpected(t)
	}
	return &Error{Pos: open.pos, Msg: `missing ")" for the "(" opened`}
}

func unexpected(t token) error {
	if t.kind == tokEnd {
		return &Error{Pos: t.pos, Msg: "unexpected end of expression"}
	}
	return &Error{Pos: t.pos, Msg: fmt.Sprintf("unexpected %q", t.text)}
}

// noise is how many float64 epsilons of error a result may carry from the
// rounding of its operands.
const noise = 4 * 0x1p-52

// cancel reads a sum smaller than its operands' rounding error as zero, so
// 0.1+0.2-0.3 is 0 and not 5.55e-17: such a sum carries no digit of the answer.
func cancel(sum, x, y float64) float64 {
	if math.Abs(sum) <= noise*max(math.Abs(x), math.Abs(y)) {
		return 0
	}
	return sum
}

// trig reads a result smaller than the error in its argument as zero, so
// sin(pi) is 0, while sin(1e-16) keeps its value.
func trig(f func(float64) float64) function {
	return function{minArgs: 1, maxArgs: 1, eval: func(a []float64) (float64, string) {
		r := f(a[0])
		if math.Abs(r) <= noise*math.Abs(a[0]) {
			return 0, ""
		}
		return r, ""
	}}
}

// check refuses results no arithmetic answer can be.
func check(x float64, pos int) error {
	switch {
	case math.IsInf(x, 0):
		return &Error{Pos: pos, Msg: "result too large"}
	case math.IsNaN(x):
		return &Error{Pos: pos, Msg: "result is not a number"}
	}
	return nil
}

var constants = map[string]float64{
	"pi": math.Pi,
	"e":  math.E,
}

// hints answer the names models reach for that mean something else here.
var hints = map[string]string{
	"log":  "use ln or log10",
	"pow":  "use ^",
	"sqr":  "use ^2",
	"mod":  "use %",
	"root": "use sqrt or ^(1/n)",
}

type function struct {
	minArgs, maxArgs int // maxArgs < 0: any number
	// eval returns the value, or a message saying why there is none.
	eval func(args []float64) (float64, string)
}

func (f function) arity() string {
	switch {
	case f.maxArgs < 0:
		return fmt.Sprintf("at least %d argument", f.minArgs)
	case f.minArgs == f.maxArgs && f.minArgs == 1:
		return "1 argument"
	case f.minArgs == f.maxArgs:
		return fmt.Sprintf("%d arguments", f.minArgs)
	}
	return fmt.Sprintf("%d or %d arguments", f.minArgs, f.maxArgs)
}

func unary(f func(float64) float64) function {
	return function{minArgs: 1, maxArgs: 1, eval: func(a []float64) (float64, string) { return f(a[0]), "" }}
}

// logarithm refuses zero and negatives by name rather than as NaN or -Inf.
func logarithm(f func(float64) float64) function {
	return function{minArgs: 1, maxArgs: 1, eval: func(a []float64) (float64, string) {
		if a[0] <= 0 {
			return 0, "needs a positive number"
		}
		return f(a[0]), ""
	}}
}

// maxRoundDigits is as far as float64 carries meaningful decimals.
const maxRoundDigits = 15

var functions = map[string]function{
	"sqrt": {minArgs: 1, maxArgs: 1, eval: func(a []float64) (float64, string) {
		if a[0] < 0 {
			return 0, "of a negative number"
		}
		return math.Sqrt(a[0]), ""
	}},
	"abs":   unary(math.Abs),
	"floor": unary(math.Floor),
	"ceil":  unary(math.Ceil),
	"exp":   unary(math.Exp),
	"sin":   trig(math.Sin),
	"cos":   trig(math.Cos),
	"tan":   trig(math.Tan),
	"ln":    logarithm(math.Log),
	"log10": logarithm(math.Log10),
	// round(x) rounds half away from zero; round(x, n) to n decimals.
	"round": {minArgs: 1, maxArgs: 2, eval: func(a []float64) (float64, string) {
		if len(a) == 1 {
			return math.Round(a[0]), ""
		}
		n := a[1]
		if n != math.Trunc(n) || math.Abs(n) > maxRoundDigits {
			return 0, fmt.Sprintf("takes a whole number of digits from -%d to %d", maxRoundDigits, maxRoundDigits)
		}
		scale := math.Pow(10, n)
		if r := math.Round(a[0]*scale) / scale; !math.IsInf(a[0]*scale, 0) {
			return r, ""
		}
		return a[0], ""
	}},
	"min": {minArgs: 1, maxArgs: -1, eval: func(a []float64) (float64, string) {
		m := a[0]
		for _, x := range a[1:] {
			m = math.Min(m, x)
		}
		return m, ""
	}},
	"max": {minArgs: 1, maxArgs: -1, eval: func(a []float64) (float64, string) {
		m := a[0]
		for _, x := range a[1:] {
			m = math.Max(m, x)
		}
		return m, ""
	}},
}
