package preview

import "github.com/toolgate/toolgate/ent/schematype"

// Short names for the tables of this package's tests.
const (
	Text  = schematype.KindText
	JSON  = schematype.KindJSON
	Media = schematype.KindMedia
)
