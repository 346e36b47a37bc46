package model

import (
	"bytes"
	"hash/maphash"
	"sync"
)

// deckCacheSize bounds the decks a Deck remembers: one per agent whose
// turns run at the same time is enough, and a deck's encoding is tens of
// kilobytes.
const deckCacheSize = 64

// Deck remembers a provider's wire form of a deck of tool definitions, so
// that each model call of a turn, and each turn of the same agent, reuses
// it instead of re-encoding every definition through the SDK's reflective
// marshaller. A deck is found by its content (names, descriptions and
// schemas), compared whole, so a changed definition is never served a
// stale encoding. It is safe for concurrent use; its zero value is ready.
type Deck[T any] struct {
	once    sync.Once
	seed    maphash.Seed
	mu      sync.Mutex
	entries map[uint64]*deckEntry[T]
}

type deckEntry[T any] struct {
	// tools is the deck the value was made from, its schemas copied, so
	// that a caller reusing its own slices cannot change it.
	tools []ToolSpec
	value T
}

// Get returns the encoding of tools, made by encode the first time the
// deck is seen. An error from encode is returned and not remembered.
func (d *Deck[T]) Get(tools []ToolSpec, encode func([]ToolSpec) (T, error)) (T, error) {
	d.once.Do(func() {
		d.seed = maphash.MakeSeed()
		d.entries = map[uint64]*deckEntry[T]{}
	})
	key := d.hash(tools)
	d.mu.Lock()
	e, ok := d.entries[key]
	d.mu.Unlock()
	if ok && sameDeck(e.tools, tools) {
		return e.value, nil
	}
	v, err := encode(tools)
	if err != nil {
		return v, err
	}
	e = &deckEntry[T]{tools: make([]ToolSpec, len(tools)), value: v}
	for i, t := range tools {
		e.tools[i] = ToolSpec{Name: t.Name, Description: t.Description, Schema: bytes.Clone(t.Schema)}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.entries) >= deckCacheSize {
		// Forget any one: decks are few, and an evicted one is encoded again.
		for k := range d.entries {
			delete(d.entries, k)
			break
		}
	}
	d.entries[key] = e
	return v, nil
}

func (d *Deck[T]) hash(tools []ToolSpec) uint64 {
	var h maphash.Hash
	h.SetSeed(d.seed)
	for _, t := range tools {
		// Lengths first, so that moving bytes between fields changes the hash.
		maphash.WriteComparable(&h, [3]int{len(t.Name), len(t.Description), len(t.Schema)})
		h.WriteString(t.Name)
		h.WriteString(t.Description)
		_, _ = h.Write(t.Schema)
	}
	return h.Sum64()
}

func sameDeck(a, b []ToolSpec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Description != b[i].Description || !bytes.Equal(a[i].Schema, b[i].Schema) {
			return false
		}
	}
	return true
}
