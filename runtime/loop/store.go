package loop

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/toolgate/toolgate/ent"
	"github.com/toolgate/toolgate/ent/schematype"
	"github.com/toolgate/toolgate/runtime/dispatch"
	"github.com/toolgate/toolgate/runtime/preview"
)

// newRef returns an opaque random ref: 128 bits, so a ref cannot be guessed,
// and nothing in it says where it belongs.
func newRef() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make ref: %w", err)
	}
	return "r_" + base64.RawURLEncoding.EncodeToString(b), nil
}

// storeResult is the insert that keeps a result whole under ref, with its
// counts, before the model hears of it.
func storeResult(c *ent.Client, conversationID int, ref string, res dispatch.Result) *ent.StoredResultCreate {
	kind := res.Kind
	if kind == "" {
		kind = schematype.KindText
	}
	counts := preview.Measure(kind, res.Content)
	content := res.Content
	if content == nil {
		content = []byte{}
	}
	return c.StoredResult.Create().
		SetConversationID(conversationID).SetRef(ref).SetKind(kind).SetContent(content).
		SetChars(counts.Chars).SetBytes(counts.Bytes).SetItems(counts.Items).
		SetTruncatedAtSource(res.TruncatedAtSource)
}
