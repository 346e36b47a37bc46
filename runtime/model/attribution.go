package model

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"strconv"
)

// opaque encodes a keyed hash in lower-case base32, no padding.
var opaque = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// Attribute returns who pays for a call as keyed hashes of the rows'
// database ids: the same for the same row under the same key, so a
// provider can follow a user across calls (abuse checks, cache routing),
// yet meaningless to anyone without the key. The API's own ids are not
// sent: their mixing is public, so they decode to row numbers, and they
// stand in addresses and logs a provider's records could be joined with.
func Attribute(key []byte, organization, user, agent, conversation int) Attribution {
	return Attribution{
		Organization: opaqueID(key, "organization", organization),
		User:         opaqueID(key, "user", user),
		Agent:        opaqueID(key, "agent", agent),
		Conversation: opaqueID(key, "conversation", conversation),
	}
}

// opaqueID is 80 bits of HMAC-SHA256 over the kind and id: 16 characters.
func opaqueID(key []byte, kind string, id int) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(kind + ":" + strconv.Itoa(id)))
	return opaque.EncodeToString(mac.Sum(nil)[:10])
}

// IDs lists the attribution's ids, for checks that none reached a prompt.
func (a Attribution) IDs() []string {
	return []string{a.Organization, a.User, a.Agent, a.Conversation}
}

// PrefixKey names the request's stable prefix (system prompt and tool
// definitions): 80 bits of its SHA-256, the same for the same bytes. It
// carries nothing of who pays.
func (r Request) PrefixKey() string {
	h := sha256.New()
	h.Write([]byte(strconv.Itoa(len(r.System)) + ":" + r.System))
	for _, t := range r.Tools {
		for _, s := range []string{t.Name, t.Description, string(t.Schema)} {
			h.Write([]byte(strconv.Itoa(len(s)) + ":" + s))
		}
	}
	return "p" + opaque.EncodeToString(h.Sum(nil)[:10])
}
