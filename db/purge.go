package db

import (
	"fmt"
	"slices"

	entsql "entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/schema"

	"github.com/toolgate/toolgate/ent/attachment"
	"github.com/toolgate/toolgate/ent/documentchunk"
	"github.com/toolgate/toolgate/ent/hybrid"
	"github.com/toolgate/toolgate/ent/migrate"
	"github.com/toolgate/toolgate/ent/turn"
)

// ConversationColumn is the column by which a row belongs to a conversation.
// A table that has it, or a foreign key to a table whose rows belong to a
// conversation, is purged with the conversation: a new entity is covered
// the day it is added, with no list to keep.
const ConversationColumn = "conversation_id"

// Owned is one table whose rows a conversation owns, and how to find them.
type Owned struct {
	// Table is the table's name.
	Table string
	// Direct is true when the table has ConversationColumn itself.
	Direct bool
	// Via are the foreign keys (column → owned table) that make its rows
	// the conversation's through a parent row.
	Via []Link
}

// Link is a foreign key from a column to an owned table's primary key.
type Link struct {
	Column string
	Parent string
}

// ConversationOwned lists the tables a conversation owns, children before
// their parents: the order in which their rows are deleted so no foreign
// key is ever left pointing at a deleted row. It fails on a foreign-key
// cycle among them.
func ConversationOwned() ([]Owned, error) {
	return conversationOwned(migrate.Tables)
}

func conversationOwned(tables []*schema.Table) ([]Owned, error) {
	const root = "conversations"
	owned := map[string]*Owned{root: {Table: root}}
	for changed := true; changed; {
		changed = false
		for _, t := range tables {
			if t.Name == root {
				continue
			}
			o := owned[t.Name]
			if o == nil {
				o = &Owned{Table: t.Name}
			}
			before := len(o.Via)
			direct := o.Direct
			for _, c := range t.Columns {
				if c.Name == ConversationColumn {
					o.Direct = true
				}
			}
			for _, fk := range t.ForeignKeys {
				if fk.RefTable == nil || owned[fk.RefTable.Name] == nil || len(fk.Columns) != 1 {
					continue
				}
				l := Link{Column: fk.Columns[0].Name, Parent: fk.RefTable.Name}
				if l.Column == ConversationColumn || slices.Contains(o.Via, l) {
					continue
				}
				o.Via = append(o.Via, l)
			}
			if o.Direct || len(o.Via) > 0 {
				if owned[t.Name] == nil || len(o.Via) != before || o.Direct != direct {
					changed = true
				}
				owned[t.Name] = o
			}
		}
	}
	// Children first: a table is deleted before every owned table it
	// references.
	var (
		order []Owned
		state = map[string]int{} // 1 visiting, 2 done
		visit func(name string) error
	)
	refs := map[string][]string{}
	for _, t := range tables {
		for _, fk := range t.ForeignKeys {
			if fk.RefTable != nil && owned[t.Name] != nil && owned[fk.RefTable.Name] != nil && fk.RefTable.Name != t.Name {
				refs[fk.RefTable.Name] = append(refs[fk.RefTable.Name], t.Name)
			}
		}
	}
	visit = func(name string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("conversation-owned tables reference each other in a cycle through %s", name)
		case 2:
			return nil
		}
		state[name] = 1
		for _, child := range refs[name] {
			if err := visit(child); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, *owned[name])
		return nil
	}
	names := make([]string, 0, len(owned))
	for n := range owned {
		if n != root {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	names = append(names, root) // last: after every row that points at it
	for _, n := range names {
		if err := visit(n); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// ownedWhere is the predicate that picks the rows of table o that belong
// to conversation id.
func ownedWhere(byName map[string]Owned, o Owned, id int) *entsql.Predicate {
	if o.Table == "conversations" {
		return entsql.EQ("id", id)
	}
	var ors []*entsql.Predicate
	if o.Direct {
		ors = append(ors, entsql.EQ(ConversationColumn, id))
	}
	for _, l := range o.Via {
		parent := byName[l.Parent]
		ors = append(ors, entsql.In(l.Column, entsql.Select("id").From(entsql.Table(parent.Table)).Where(ownedWhere(byName, parent, id))))
	}
	return entsql.Or(ors...)
}

// PurgeStatements returns the statements that delete conversation id and
// every row it owns, in the order to run them, in dialect d. Idempotent
// responses kept under the conversation's scope ("conversation:<id>", the
// key space of its turns' scope tokens) go too, and so do the passages of
// its attachments: the chunks (owned by a plain column, not a foreign key)
// and their entries in the search index, under the same scope.
func PurgeStatements(d string, id int) ([]Statement, error) {
	order, err := ConversationOwned()
	if err != nil {
		return nil, err
	}
	byName := map[string]Owned{}
	for _, o := range order {
		byName[o.Table] = o
	}
	b := entsql.Dialect(d)
	out := []Statement{}
	q, args := b.Delete("idempotent_responses").Where(entsql.EQ("scope", fmt.Sprintf("conversation:%d", id))).Query()
	out = append(out, Statement{Table: "idempotent_responses", Query: q, Args: args})
	q, args = b.Delete(hybrid.Table).Where(entsql.EQ("scope", fmt.Sprintf("conversation:%d", id))).Query()
	out = append(out, Statement{Table: hybrid.Table, Query: q, Args: args})
	// The person's messages, indexed per turn for past-conversation search.
	q, args = b.Delete(hybrid.Table).Where(entsql.And(entsql.EQ("idx", hybrid.IndexTurns), entsql.In("id",
		entsql.Select(turn.FieldID).From(entsql.Table(turn.Table)).Where(entsql.EQ(turn.FieldConversationID, id))))).Query()
	out = append(out, Statement{Table: hybrid.Table, Query: q, Args: args})
	q, args = b.Delete(documentchunk.Table).Where(entsql.In(documentchunk.FieldAttachmentID,
		entsql.Select(attachment.FieldID).From(entsql.Table(attachment.Table)).Where(entsql.EQ(attachment.FieldConversationID, id)))).Query()
	out = append(out, Statement{Table: documentchunk.Table, Query: q, Args: args})
	for _, o := range order {
		q, args := b.Delete(o.Table).Where(ownedWhere(byName, o, id)).Query()
		out = append(out, Statement{Table: o.Table, Query: q, Args: args})
	}
	return out, nil
}

// OwnedCount returns a statement counting the rows of table that belong to
// conversation id, for checks that a purge left none.
func OwnedCount(d, table string, id int) (Statement, error) {
	order, err := ConversationOwned()
	if err != nil {
		return Statement{}, err
	}
	byName := map[string]Owned{}
	for _, o := range order {
		byName[o.Table] = o
	}
	o, ok := byName[table]
	if !ok {
		return Statement{}, fmt.Errorf("table %s is not owned by conversations", table)
	}
	q, args := entsql.Dialect(d).Select(entsql.Count("*")).From(entsql.Table(table)).Where(ownedWhere(byName, o, id)).Query()
	return Statement{Table: table, Query: q, Args: args}, nil
}

// Statement is one SQL statement with its arguments.
type Statement struct {
	Table string
	Query string
	Args  []any
}
