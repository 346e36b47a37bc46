// Package token counts what a model call sends in o200k_base tokens: the
// one tokenizer the deck, the catalogue's figures and the recorded model's
// usage all count with.
package token

import (
	"sync"

	"github.com/tiktoken-go/tokenizer"

	"github.com/toolgate/toolgate/tools"
)

var (
	codecOnce sync.Once
	codec     tokenizer.Codec
)

// Count counts s in o200k_base tokens. The vocabulary is embedded in the
// binary and loaded once, on first use.
func Count(s string) int {
	codecOnce.Do(func() {
		var err error
		codec, err = tokenizer.Get(tokenizer.O200kBase)
		if err != nil {
			// The encoding is compiled in: failing to load it is a broken build.
			panic("load o200k_base: " + err.Error())
		}
	})
	// Count fails only in strict error mode, which is never set.
	n, _ := codec.Count(s)
	return n
}

// maxMemo bounds the token counts kept: far more than the definitions and
// guidance paragraphs there are, so only a catalogue that keeps changing
// starts afresh.
const maxMemo = 4096

var memo = struct {
	sync.Mutex
	n map[string]int
}{n: make(map[string]int)}

// Stable is Count for a string sent again and again (a system prompt, a
// tool's definition): counted once, then remembered. Definitions do not
// change while the process runs, and counting them anew would cost every
// turn and catalogue request milliseconds.
func Stable(s string) int {
	memo.Lock()
	n, ok := memo.n[s]
	memo.Unlock()
	if ok {
		return n
	}
	n = Count(s)
	memo.Lock()
	if len(memo.n) >= maxMemo {
		clear(memo.n)
	}
	memo.n[s] = n
	memo.Unlock()
	return n
}

// Definitions are the definitions as sent, in o200k tokens.
func Definitions(defs []tools.Definition) int {
	n := 0
	for _, d := range defs {
		n += Stable(string(d.Wire()))
	}
	return n
}

// Prefix is the stable prefix of a model call in o200k tokens: the system
// prompt and the offered tools' definitions (Definitions of them, as
// sent). Both are the same strings call after call, so they are counted
// once.
func Prefix(system string, definitionTokens int) int {
	return Stable(system) + definitionTokens
}
