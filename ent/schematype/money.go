package schematype

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Micros is an exact amount of US dollars in millionths of a dollar. Money
// is stored and summed as these integers, so no amount drifts by float
// rounding however many are added up; the API shows it as Money.
type Micros int64

// Currency is the ISO 4217 code of every amount: prices are in USD.
const Currency = "USD"

// MicrosFromUSD converts dollars to micro-dollars, rounding to the nearest.
func MicrosFromUSD(usd float64) Micros { return Micros(math.Round(usd * 1e6)) }

// USD is the amount in dollars, as the deprecated Float fields show it.
func (m Micros) USD() float64 { return float64(m) / 1e6 }

// Int64 is the amount in micro-dollars (Money.micros).
func (m Micros) Int64() int64 { return int64(m) }

// Currency is the amount's ISO 4217 code (Money.currency).
func (Micros) Currency() string { return Currency }

// Amount is the exact amount as a decimal string with six decimals, e.g.
// "12.500000" (Money.amount).
func (m Micros) Amount() string {
	sign, u := "", uint64(m)
	if m < 0 {
		sign, u = "-", uint64(-m)
	}
	return fmt.Sprintf("%s%d.%06d", sign, u/1e6, u%1e6)
}

// String is the amount as a person reads it: $12.50, or $0.000123 below a
// cent.
func (m Micros) String() string {
	if m%10_000 != 0 {
		return "$" + m.Amount()
	}
	s := m.Amount()
	return "$" + s[:len(s)-4]
}

// ParseMicros reads a non-negative decimal amount of dollars with at most
// six decimals ("12", "12.5", "0.000001") exactly, without going through a
// float.
func ParseMicros(s string) (Micros, error) {
	whole, frac, dot := strings.Cut(strings.TrimSpace(s), ".")
	if whole == "" && (!dot || frac == "") {
		return 0, errors.New("want a decimal amount such as 12.50")
	}
	if len(frac) > 6 {
		return 0, errors.New("at most six decimals (a micro-dollar)")
	}
	digits := func(p string) bool {
		for _, r := range p {
			if r < '0' || r > '9' {
				return false
			}
		}
		return true
	}
	if !digits(whole) || !digits(frac) {
		return 0, errors.New("want a non-negative decimal amount such as 12.50")
	}
	var w uint64
	if whole != "" {
		var err error
		if w, err = strconv.ParseUint(whole, 10, 64); err != nil || w > math.MaxInt64/1_000_000-1 {
			return 0, errors.New("amount too large")
		}
	}
	f, _ := strconv.ParseUint((frac + "000000")[:6], 10, 64)
	return Micros(w*1e6 + f), nil
}
